// CPU kernels of the gradient helper ops (graph/gradients/grad_ops.h).
// BroadcastTo, Pad and Unpack only move elements, so, like the array kernels,
// each is registered once for every dtype and copies raw bytes; the rest read
// and write small int32/int64 index vectors.
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/gradients/grad_ops.h"
#include "graph/ops/array_ops.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

char* Bytes(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

absl::Status RequireVector(const Tensor& t, const char* what) {
  if (t.dims() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be a vector, got shape ", t.shape().DebugString()));
  }
  return absl::OkStatus();
}

// Writes int64 `values` into a fresh int32 or int64 vector output.
absl::Status SetIntVectorOutput(OpKernelContext& ctx, int i, const std::vector<int64_t>& values) {
  Tensor* out;
  STRATA_RETURN_IF_ERROR(
      ctx.allocate_output(i, TensorShape{static_cast<int64_t>(values.size())}, &out));
  for (size_t k = 0; k < values.size(); ++k) {
    if (out->dtype() == DT_INT32) {
      out->data<int32_t>()[k] = static_cast<int32_t>(values[k]);
    } else {
      out->data<int64_t>()[k] = values[k];
    }
  }
  return absl::OkStatus();
}

// ---- Strided copy (BroadcastTo, Pad) ----------------------------------------

// A copy over the index space `dims`: element `idx` goes from src offset
// sum(idx * src_strides) to dst offset sum(idx * dst_strides) (in elements).
// A src stride of 0 repeats the element (broadcast).
struct StridedCopy {
  std::vector<int64_t> dims, src_strides, dst_strides;
};

// Merges adjacent dims that walk both layouts contiguously, so that
// broadcasting [N,1] to [N,M] or padding the outer dim of a matrix become a
// few long runs instead of many short ones; size-1 dims are dropped.
StridedCopy Collapse(const StridedCopy& in) {
  StridedCopy out;
  for (size_t i = 0; i < in.dims.size(); ++i) {
    if (in.dims[i] == 1) continue;
    if (!out.dims.empty() && out.src_strides.back() == in.src_strides[i] * in.dims[i] &&
        out.dst_strides.back() == in.dst_strides[i] * in.dims[i]) {
      out.dims.back() *= in.dims[i];
      out.src_strides.back() = in.src_strides[i];
      out.dst_strides.back() = in.dst_strides[i];
      continue;
    }
    out.dims.push_back(in.dims[i]);
    out.src_strides.push_back(in.src_strides[i]);
    out.dst_strides.push_back(in.dst_strides[i]);
  }
  if (out.dims.empty()) out = {{1}, {1}, {1}};
  return out;
}

// `n` elements from src (every `src_stride`-th; 0 repeats one) to dst
// (every `dst_stride`-th), typed for the common element sizes so the loop
// is not a memcpy call per element.
template <typename U>
void CopyStridedAs(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t n) {
  const U* s = reinterpret_cast<const U*>(src);
  U* d = reinterpret_cast<U*>(dst);
  for (int64_t k = 0; k < n; ++k) d[k * dst_stride] = s[k * src_stride];
}

void CopyStrided(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t n,
                 size_t elem) {
  switch (elem) {
    case 1: return CopyStridedAs<uint8_t>(src, src_stride, dst, dst_stride, n);
    case 2: return CopyStridedAs<uint16_t>(src, src_stride, dst, dst_stride, n);
    case 4: return CopyStridedAs<uint32_t>(src, src_stride, dst, dst_stride, n);
    case 8: return CopyStridedAs<uint64_t>(src, src_stride, dst, dst_stride, n);
    default:
      for (int64_t k = 0; k < n; ++k) {
        std::memcpy(dst + k * dst_stride * elem, src + k * src_stride * elem, elem);
      }
  }
}

void RunStridedCopy(const Eigen::ThreadPoolDevice& dev, const StridedCopy& raw, size_t elem,
                    const char* src, char* dst) {
  const StridedCopy c = Collapse(raw);
  const int r = static_cast<int>(c.dims.size());
  const int64_t inner = c.dims[r - 1];
  const int64_t inner_src = c.src_strides[r - 1];
  const int64_t inner_dst = c.dst_strides[r - 1];
  int64_t rows = 1;
  for (int i = 0; i < r - 1; ++i) rows *= c.dims[i];
  if (rows == 0 || inner == 0) return;
  const double row_bytes = static_cast<double>(inner * elem);
  dev.parallelFor(rows, Eigen::TensorOpCost(row_bytes, row_bytes, 0),
                  [&](Eigen::Index begin, Eigen::Index end) {
                    for (Eigen::Index row = begin; row < end; ++row) {
                      int64_t s = 0, d = 0, rem = row;
                      for (int i = r - 2; i >= 0; --i) {
                        const int64_t k = rem % c.dims[i];
                        rem /= c.dims[i];
                        s += k * c.src_strides[i];
                        d += k * c.dst_strides[i];
                      }
                      const char* sp = src + s * elem;
                      char* dp = dst + d * elem;
                      if (inner_src == 1 && inner_dst == 1) {
                        std::memcpy(dp, sp, inner * elem);
                      } else {
                        CopyStrided(sp, inner_src, dp, inner_dst, inner, elem);
                      }
                    }
                  });
}

std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * dims[i + 1];
  return s;
}

// ---- Kernels ------------------------------------------------------------------

class BroadcastGradientArgsOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_RETURN_IF_ERROR(RequireVector(ctx.input(0), "BroadcastGradientArgs s0"));
    STRATA_RETURN_IF_ERROR(RequireVector(ctx.input(1), "BroadcastGradientArgs s1"));
    STRATA_ASSIGN_OR_RETURN(auto s0, IntTensorValues(ctx.input(0), "s0"));
    STRATA_ASSIGN_OR_RETURN(auto s1, IntTensorValues(ctx.input(1), "s1"));
    std::vector<int64_t> r0, r1;
    STRATA_RETURN_IF_ERROR(BroadcastGradientAxes(s0, s1, &r0, &r1));
    STRATA_RETURN_IF_ERROR(SetIntVectorOutput(ctx, 0, r0));
    return SetIntVectorOutput(ctx, 1, r1);
  }
};

class BroadcastToOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(TensorShape target,
                            ShapeFromShapeTensor(ctx.input(1), "BroadcastTo shape"));
    STRATA_RETURN_IF_ERROR(CheckBroadcastTo(in.shape(), target.dim_sizes()));
    if (in.shape() == target) {
      ctx.set_output(0, in);
      return absl::OkStatus();
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, target, &out));
    if (out->NumElements() == 0) return absl::OkStatus();
    StridedCopy c;
    c.dims.assign(target.dim_sizes().begin(), target.dim_sizes().end());
    c.dst_strides = RowMajorStrides(c.dims);
    const std::vector<int64_t> in_strides = RowMajorStrides(in.shape().dim_sizes());
    const int pad = target.dims() - in.dims();
    c.src_strides.assign(target.dims(), 0);
    for (int i = 0; i < in.dims(); ++i) {
      if (in.dim_size(i) != 1) c.src_strides[pad + i] = in_strides[i];
    }
    RunStridedCopy(ctx.eigen_cpu_device(), c, DataTypeSize(in.dtype()), Bytes(in), Bytes(*out));
    return absl::OkStatus();
  }
};

class ReducedShapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_RETURN_IF_ERROR(RequireVector(ctx.input(0), "ReducedShape input_shape"));
    if (ctx.input(1).dims() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ReducedShape axes must be a scalar or vector, got shape ",
          ctx.input(1).shape().DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(auto shape, IntTensorValues(ctx.input(0), "input_shape"));
    STRATA_ASSIGN_OR_RETURN(auto axes, IntTensorValues(ctx.input(1), "axes"));
    STRATA_ASSIGN_OR_RETURN(auto out, KeepDimsShape(shape, axes));
    return SetIntVectorOutput(ctx, 0, out);
  }
};

class SizeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const int64_t n = ctx.input(0).NumElements();
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape(), &out));
    if (out->dtype() == DT_INT32) {
      if (n > INT32_MAX) {
        return absl::InvalidArgumentError(
            absl::StrCat("Size has out_type int32 but the input has ", n, " elements"));
      }
      *out->data<int32_t>() = static_cast<int32_t>(n);
    } else {
      *out->data<int64_t>() = n;
    }
    return absl::OkStatus();
  }
};

class PadOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Tensor& pad_t = ctx.input(1);
    if (pad_t.dims() != 2 || pad_t.dim_size(1) != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Pad paddings must have shape [rank, 2], got ", pad_t.shape().DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(auto pads, IntTensorValues(pad_t, "Pad paddings"));
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_p, PadOutputShape(in.shape(), pads));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, out_p.AsTensorShape());
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    // Zero bits are zero in every dtype a Tensor holds.
    if (out->TotalBytes() > 0) std::memset(out->raw_data(), 0, out->TotalBytes());
    if (in.NumElements() == 0) return absl::OkStatus();
    StridedCopy c;
    c.dims.assign(in.shape().dim_sizes().begin(), in.shape().dim_sizes().end());
    c.src_strides = RowMajorStrides(c.dims);
    c.dst_strides = RowMajorStrides(out_shape.dim_sizes());
    int64_t offset = 0;
    for (int i = 0; i < in.dims(); ++i) offset += pads[2 * i] * c.dst_strides[i];
    const size_t elem = DataTypeSize(in.dtype());
    RunStridedCopy(ctx.eigen_cpu_device(), c, elem, Bytes(in), Bytes(*out) + offset * elem);
    return absl::OkStatus();
  }
};

class ConcatOffsetOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& dim_t = ctx.input(0);
    if (dim_t.dims() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ConcatOffset concat_dim must be a scalar, got shape ", dim_t.shape().DebugString()));
    }
    const int n = num_inputs() - 1;
    std::vector<std::vector<int64_t>> shapes;
    for (int i = 0; i < n; ++i) {
      STRATA_RETURN_IF_ERROR(RequireVector(ctx.input(1 + i), "ConcatOffset shape"));
      STRATA_ASSIGN_OR_RETURN(auto s, IntTensorValues(ctx.input(1 + i), "ConcatOffset shape"));
      shapes.push_back(std::move(s));
    }
    const int rank = static_cast<int>(shapes[0].size());
    STRATA_ASSIGN_OR_RETURN(int axis,
                            NormalizeAxis(*dim_t.data<int32_t>(), rank, "ConcatOffset concat_dim"));
    int64_t offset = 0;
    for (int i = 0; i < n; ++i) {
      if (static_cast<int>(shapes[i].size()) != rank) {
        return absl::InvalidArgumentError(absl::StrCat("ConcatOffset shape ", i, " has ",
                                                       shapes[i].size(), " dims, shape 0 has ",
                                                       rank));
      }
      for (int d = 0; d < rank; ++d) {
        if (d != axis && shapes[i][d] != shapes[0][d]) {
          return absl::InvalidArgumentError(absl::StrCat(
              "ConcatOffset shapes 0 and ", i, " differ in dim ", d, " (", shapes[0][d], " vs. ",
              shapes[i][d], "), which is not the concat dim ", axis));
        }
      }
      std::vector<int64_t> off(rank, 0);
      off[axis] = offset;
      offset += shapes[i][axis];
      STRATA_RETURN_IF_ERROR(SetIntVectorOutput(ctx, i, off));
    }
    return absl::OkStatus();
  }
};

class UnpackOp : public OpKernel {
 public:
  explicit UnpackOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("axis", &axis_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_p,
                            UnpackOutputShape(in.shape(), num_outputs(), axis_));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, out_p.AsTensorShape());
    STRATA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_, in.dims(), "Unpack axis"));
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= in.dim_size(i);
    for (int i = axis + 1; i < in.dims(); ++i) inner *= in.dim_size(i);
    const int64_t n = in.dim_size(axis);
    const size_t row = inner * DataTypeSize(in.dtype());
    for (int k = 0; k < num_outputs(); ++k) {
      Tensor* out;
      STRATA_RETURN_IF_ERROR(ctx.allocate_output(k, out_shape, &out));
      for (int64_t r = 0; r < outer && row > 0; ++r) {
        std::memcpy(Bytes(*out) + r * row, Bytes(in) + (r * n + k) * row, row);
      }
    }
    return absl::OkStatus();
  }

 private:
  int64_t axis_ = 0;
};

class InvertPermutationOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_RETURN_IF_ERROR(RequireVector(ctx.input(0), "InvertPermutation x"));
    STRATA_ASSIGN_OR_RETURN(auto perm, IntTensorValues(ctx.input(0), "x"));
    const int64_t n = static_cast<int64_t>(perm.size());
    std::vector<int64_t> inv(n, -1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = perm[i];
      if (p < 0 || p >= n || inv[p] != -1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "InvertPermutation input is not a permutation of [0, ", n, "): entry ", i, " is ", p));
      }
      inv[p] = i;
    }
    return SetIntVectorOutput(ctx, 0, inv);
  }
};

#define REGISTER_INDEX_KERNEL(OP, ATTR, KERNEL)                                         \
  STRATA_REGISTER_KERNEL(                                                               \
      KernelBuilder(OP).Device(kDeviceCpu).TypeConstraint<int32_t>(ATTR), KERNEL);      \
  STRATA_REGISTER_KERNEL(                                                               \
      KernelBuilder(OP).Device(kDeviceCpu).TypeConstraint<int64_t>(ATTR), KERNEL)

REGISTER_INDEX_KERNEL("BroadcastGradientArgs", "T", BroadcastGradientArgsOp);
REGISTER_INDEX_KERNEL("ReducedShape", "T", ReducedShapeOp);
REGISTER_INDEX_KERNEL("ConcatOffset", "shape_type", ConcatOffsetOp);
REGISTER_INDEX_KERNEL("InvertPermutation", "T", InvertPermutationOp);
#undef REGISTER_INDEX_KERNEL

STRATA_REGISTER_KERNEL(KernelBuilder("BroadcastTo").Device(kDeviceCpu), BroadcastToOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Size").Device(kDeviceCpu), SizeOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Pad").Device(kDeviceCpu), PadOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Unpack").Device(kDeviceCpu), UnpackOp);

}  // namespace
}  // namespace strata
