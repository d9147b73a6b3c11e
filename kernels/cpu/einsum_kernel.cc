// Einsum on the CPU (graph/ops/einsum.h). Each operand first sums the
// labels only it has and the output lacks; a single operand is then
// permuted to the output's order. Two operands become one batched matrix
// product: A permuted to [batch, free A, contracted], B to [batch,
// contracted, free B] (batch labels: in both and in the output, in the
// output's order; a size-1 ellipsis dim broadcasts), each batch an Eigen
// product, and the [batch, free A, free B] result permuted to the output.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/einsum.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

// A dense row-major tensor whose dims carry labels.
template <typename T>
struct Labeled {
  std::vector<T> data;
  std::vector<int> labels;
  std::vector<int64_t> dims;
};

bool Has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

std::vector<int64_t> Strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

int64_t Product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Calls f(offset) for each multi-index over `dims` in row-major order, the
// offset being the index dotted with `strides`.
template <typename F>
void Walk(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, F f) {
  const int64_t n = Product(dims);
  std::vector<int64_t> idx(dims.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(off);
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      off += strides[d];
      if (++idx[d] < dims[d]) break;
      off -= strides[d] * dims[d];
      idx[d] = 0;
    }
  }
}

// x with its dims in the order of `labels` (a permutation of x's).
template <typename T>
Labeled<T> Permute(const Labeled<T>& x, const std::vector<int>& labels) {
  if (labels == x.labels) return x;
  Labeled<T> y;
  y.labels = labels;
  const std::vector<int64_t> xs = Strides(x.dims);
  std::vector<int64_t> strides;
  for (int l : labels) {
    const size_t k = static_cast<size_t>(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin());
    y.dims.push_back(x.dims[k]);
    strides.push_back(xs[k]);
  }
  y.data.reserve(x.data.size());
  Walk(y.dims, strides, [&](int64_t off) { y.data.push_back(x.data[static_cast<size_t>(off)]); });
  return y;
}

// x summed over the labels not in `keep` (x's other labels keep their order).
template <typename T>
Labeled<T> SumOut(const Labeled<T>& x, const std::vector<int>& keep) {
  std::vector<int> kept, order;
  for (int l : x.labels) {
    if (Has(keep, l)) kept.push_back(l);
  }
  if (kept.size() == x.labels.size()) return x;
  order = kept;
  for (int l : x.labels) {
    if (!Has(keep, l)) order.push_back(l);
  }
  const Labeled<T> p = Permute(x, order);
  Labeled<T> y;
  y.labels = kept;
  y.dims.assign(p.dims.begin(), p.dims.begin() + kept.size());
  const int64_t rows = Product(y.dims);
  const int64_t run = rows == 0 ? 0 : static_cast<int64_t>(p.data.size()) / rows;
  y.data.assign(static_cast<size_t>(rows), T(0));
  for (int64_t r = 0; r < rows; ++r) {
    T acc = T(0);
    for (int64_t j = 0; j < run; ++j) acc += p.data[static_cast<size_t>(r * run + j)];
    y.data[static_cast<size_t>(r)] = acc;
  }
  return y;
}

// Removes from x the size-1 dims of labels that the output lacks and that
// `other` has with another size (their data is unchanged: size 1).
template <typename T>
void DropBroadcastContracted(const std::vector<int>& output, Labeled<T>* x, const Labeled<T>& other) {
  for (size_t k = 0; k < x->labels.size();) {
    const int l = x->labels[k];
    const auto it = std::find(other.labels.begin(), other.labels.end(), l);
    if (x->dims[k] == 1 && !Has(output, l) && it != other.labels.end() &&
        other.dims[static_cast<size_t>(it - other.labels.begin())] != 1) {
      x->labels.erase(x->labels.begin() + static_cast<std::ptrdiff_t>(k));
      x->dims.erase(x->dims.begin() + static_cast<std::ptrdiff_t>(k));
    } else {
      ++k;
    }
  }
}

template <typename T>
Labeled<T> FromTensor(const Tensor& t, const std::vector<int>& labels) {
  Labeled<T> x;
  x.data.assign(t.data<T>(), t.data<T>() + t.NumElements());
  x.labels = labels;
  x.dims.assign(t.shape().dim_sizes().begin(), t.shape().dim_sizes().end());
  return x;
}

// A [batch, M, K] x B [batch, K, N] with the batch dims of each broadcast
// to `batch_sizes`.
template <typename T>
Labeled<T> BatchProduct(const OpKernelContext& ctx, const Labeled<T>& a, const Labeled<T>& b,
                        const std::vector<int>& batch, const std::vector<int64_t>& batch_sizes, size_t nm, size_t nk,
                        size_t nn) {
  const size_t nb = batch.size();
  auto prod = [](const std::vector<int64_t>& d, size_t from, size_t to) {
    int64_t n = 1;
    for (size_t i = from; i < to; ++i) n *= d[i];
    return n;
  };
  const int64_t m = prod(a.dims, nb, nb + nm), k = prod(a.dims, nb + nm, nb + nm + nk);
  const int64_t n = prod(b.dims, nb + nk, nb + nk + nn);
  // Each operand's batch offset (in matrices) for each output batch.
  auto offsets = [&](const Labeled<T>& x) {
    std::vector<int64_t> s(nb, 0);
    int64_t acc = 1;
    for (int i = static_cast<int>(nb) - 1; i >= 0; --i) {
      s[i] = x.dims[i] == 1 ? 0 : acc;
      acc *= x.dims[i];
    }
    std::vector<int64_t> off;
    Walk(batch_sizes, s, [&](int64_t o) { off.push_back(o); });
    return off;
  };
  const std::vector<int64_t> ao = offsets(a), bo = offsets(b);
  Labeled<T> c;
  c.labels = batch;
  c.dims = batch_sizes;
  c.labels.insert(c.labels.end(), a.labels.begin() + nb, a.labels.begin() + nb + nm);
  c.dims.insert(c.dims.end(), a.dims.begin() + nb, a.dims.begin() + nb + nm);
  c.labels.insert(c.labels.end(), b.labels.begin() + nb + nk, b.labels.end());
  c.dims.insert(c.dims.end(), b.dims.begin() + nb + nk, b.dims.end());
  const int64_t batches = static_cast<int64_t>(ao.size());
  c.data.assign(static_cast<size_t>(batches * m * n), T(0));
  if (k == 0 || m == 0 || n == 0) return c;
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  ctx.eigen_cpu_device().parallelFor(
      batches, Eigen::TensorOpCost(double(m * k + k * n) * sizeof(T), double(m * n) * sizeof(T), double(2 * m * n * k)),
      [&](Eigen::Index first, Eigen::Index last) {
        for (Eigen::Index i = first; i < last; ++i) {
          Eigen::Map<const Mat> ma(a.data.data() + ao[i] * m * k, m, k);
          Eigen::Map<const Mat> mb(b.data.data() + bo[i] * k * n, k, n);
          Eigen::Map<Mat> mc(c.data.data() + i * m * n, m, n);
          mc.noalias() = ma * mb;
        }
      });
  return c;
}

template <typename T>
class EinsumOp : public OpKernel {
 public:
  explicit EinsumOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("equation", &equation_));
  }
  bool IsExpensive() const override { return true; }

  absl::Status Compute(OpKernelContext& ctx) override {
    std::vector<int> ranks;
    std::vector<PartialTensorShape> shapes;
    for (int i = 0; i < num_inputs(); ++i) {
      ranks.push_back(ctx.input(i).dims());
      shapes.push_back(PartialTensorShape(ctx.input(i).shape().dim_sizes()));
    }
    STRATA_ASSIGN_OR_RETURN(EinsumSpec spec, ParseEinsum(equation_, ranks));
    std::vector<int64_t> sizes;
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_p, EinsumOutputShape(equation_, spec, shapes, &sizes));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, out_p.AsTensorShape());
    Labeled<T> result;
    if (num_inputs() == 1) {
      result = Permute(SumOut(FromTensor<T>(ctx.input(0), spec.inputs[0]), spec.output), spec.output);
    } else {
      const std::vector<int>& la = spec.inputs[0];
      const std::vector<int>& lb = spec.inputs[1];
      Labeled<T> a0 = FromTensor<T>(ctx.input(0), la), b0 = FromTensor<T>(ctx.input(1), lb);
      // A contracted ellipsis dim of size 1 in one operand against n in the
      // other broadcasts: drop it from the size-1 side (the other sums it).
      DropBroadcastContracted(spec.output, &a0, b0);
      DropBroadcastContracted(spec.output, &b0, a0);
      // Labels each operand keeps: in the output or in the other operand.
      std::vector<int> keep_a = spec.output, keep_b = spec.output;
      keep_a.insert(keep_a.end(), b0.labels.begin(), b0.labels.end());
      keep_b.insert(keep_b.end(), a0.labels.begin(), a0.labels.end());
      const Labeled<T> a = SumOut(a0, keep_a);
      const Labeled<T> b = SumOut(b0, keep_b);
      std::vector<int> batch, free_a, free_b, contracted;
      std::vector<int64_t> batch_sizes;
      for (int l : spec.output) {
        const bool in_a = Has(a.labels, l), in_b = Has(b.labels, l);
        if (in_a && in_b) {
          batch.push_back(l);
          batch_sizes.push_back(sizes[static_cast<size_t>(l)]);
        } else if (in_a) {
          free_a.push_back(l);
        } else if (in_b) {
          free_b.push_back(l);
        }
      }
      for (int l : a.labels) {
        if (!Has(spec.output, l)) contracted.push_back(l);
      }
      std::vector<int> order_a = batch, order_b = batch;
      order_a.insert(order_a.end(), free_a.begin(), free_a.end());
      order_a.insert(order_a.end(), contracted.begin(), contracted.end());
      order_b.insert(order_b.end(), contracted.begin(), contracted.end());
      order_b.insert(order_b.end(), free_b.begin(), free_b.end());
      const Labeled<T> c = BatchProduct(ctx, Permute(a, order_a), Permute(b, order_b), batch, batch_sizes,
                                        free_a.size(), contracted.size(), free_b.size());
      result = Permute(c, spec.output);
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    if (static_cast<int64_t>(result.data.size()) != out->NumElements()) {
      return absl::InternalError(absl::StrCat("Einsum '", equation_, "' computed ", result.data.size(),
                                              " elements for an output of shape ", out_shape.DebugString()));
    }
    std::copy(result.data.begin(), result.data.end(), out->data<T>());
    return absl::OkStatus();
  }

 private:
  std::string equation_;
};

STRATA_REGISTER_KERNEL(KernelBuilder("Einsum").Device(kDeviceCpu).TypeConstraint<float>("T"), EinsumOp<float>);
STRATA_REGISTER_KERNEL(KernelBuilder("Einsum").Device(kDeviceCpu).TypeConstraint<double>("T"), EinsumOp<double>);

}  // namespace
}  // namespace strata
