// CPU kernels of the array family (graph/ops/array_ops.h), except Transpose
// (transpose_kernel.cc). They move bytes and never look at element values
// (OnesLike and OneHot aside, which only write given values), so each kernel
// is registered once for every dtype and works on raw bytes; the shape rules
// are the same functions the shape inference uses.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "kernels/cpu/array_copy.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/shape_change_kernels.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

using array_copy::ConcatRows;
using array_copy::FillPattern;
using array_copy::RowSource;

char* Bytes(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

absl::Status RequireScalar(const Tensor& t, const char* what) {
  if (t.dims() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be a scalar, got shape ", t.shape().DebugString()));
  }
  return absl::OkStatus();
}

absl::Status RequireVector(const Tensor& t, const char* what) {
  if (t.dims() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must be a vector, got shape ", t.shape().DebugString()));
  }
  return absl::OkStatus();
}

// Product of dims [from, to) of `s`.
int64_t DimProduct(const TensorShape& s, int from, int to) {
  int64_t n = 1;
  for (int i = from; i < to; ++i) n *= s.dim_size(i);
  return n;
}

// Reshape: the same buffer under another shape; never copies.
class ReshapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& shape = ctx.input(1);
    if (shape.dims() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("Reshape shape must be 1-D, got shape ",
                                                     shape.shape().DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> requested, IntTensorValues(shape, "shape"));
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out,
                            ReshapeOutputShape(ctx.input(0).shape(), requested));
    STRATA_ASSIGN_OR_RETURN(TensorShape full, out.AsTensorShape());
    STRATA_ASSIGN_OR_RETURN(Tensor t, ctx.input(0).Reshaped(full));
    ctx.set_output(0, std::move(t));
    return absl::OkStatus();
  }
};

class ShapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const TensorShape& s = ctx.input(0).shape();
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{s.dims()}, &out));
    for (int i = 0; i < s.dims(); ++i) {
      const int64_t d = s.dim_size(i);
      if (output_type(0) == DT_INT32) {
        if (d > INT32_MAX) {
          return absl::InvalidArgumentError(absl::StrCat(
              "Shape has out_type int32 but dimension ", i, " of the input is ", d));
        }
        out->data<int32_t>()[i] = static_cast<int32_t>(d);
      } else {
        out->data<int64_t>()[i] = d;
      }
    }
    return absl::OkStatus();
  }
};

class FillOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& value = ctx.input(1);
    STRATA_RETURN_IF_ERROR(RequireScalar(value, "Fill value"));
    STRATA_ASSIGN_OR_RETURN(TensorShape shape, ShapeFromShapeTensor(ctx.input(0), "Fill dims"));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, shape, &out));
    FillPattern(ctx.eigen_cpu_device(), Bytes(*out), out->NumElements(), value.raw_data(),
                DataTypeSize(value.dtype()));
    return absl::OkStatus();
  }
};

// The bytes of 1 in each dtype OnesLike allows.
absl::Status OneBytes(DataType dt, uint64_t* bits) {
  auto as = [bits](auto v) {
    *bits = 0;
    std::memcpy(bits, &v, sizeof(v));
    return absl::OkStatus();
  };
  switch (dt) {
    case DT_FLOAT: return as(1.0f);
    case DT_DOUBLE: return as(1.0);
    case DT_HALF: return as(uint16_t{0x3c00});
    case DT_BFLOAT16: return as(uint16_t{0x3f80});
    case DT_BOOL: return as(true);
    case DT_INT8: return as(int8_t{1});
    case DT_UINT8: return as(uint8_t{1});
    case DT_INT16: return as(int16_t{1});
    case DT_UINT16: return as(uint16_t{1});
    case DT_INT32: return as(int32_t{1});
    case DT_UINT32: return as(uint32_t{1});
    case DT_INT64: return as(int64_t{1});
    case DT_UINT64: return as(uint64_t{1});
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("OnesLike does not support dtype ", DataTypeString(dt)));
  }
}

// ZerosLike (kOne = false) and OnesLike: write into the input's buffer when
// nobody else holds it.
template <bool kOne>
class ConstantLikeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const DataType dt = input_type(0);
    uint64_t bits = 0;
    if (kOne) STRATA_RETURN_IF_ERROR(OneBytes(dt, &bits));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(
        ctx.forward_input_or_allocate_output({0}, 0, ctx.input(0).shape(), &out));
    if (kOne) {
      FillPattern(ctx.eigen_cpu_device(), Bytes(*out), out->NumElements(), &bits,
                  DataTypeSize(dt));
    } else if (out->TotalBytes() > 0) {
      std::memset(out->raw_data(), 0, out->TotalBytes());  // 0 bits are zero in every dtype
    }
    return absl::OkStatus();
  }
};

// ConcatV2: each input seen as [rows, its bytes from the axis on]; the output
// row is the inputs' rows one after another.
class ConcatV2Op : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const int n = num_inputs() - 1;
    const Tensor& axis_t = ctx.input(n);
    STRATA_RETURN_IF_ERROR(RequireScalar(axis_t, "ConcatV2 axis"));
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> axis_v, IntTensorValues(axis_t, "ConcatV2 axis"));
    std::vector<PartialTensorShape> shapes;
    for (int i = 0; i < n; ++i) shapes.push_back(ctx.input(i).shape());
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_p, ConcatOutputShape(shapes, axis_v[0]));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, out_p.AsTensorShape());
    STRATA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_v[0], out_shape.dims(), "concat axis"));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    const size_t elem = DataTypeSize(input_type(0));
    std::vector<RowSource> srcs;
    for (int i = 0; i < n; ++i) {
      const Tensor& in = ctx.input(i);
      srcs.push_back({Bytes(in), DimProduct(in.shape(), axis, in.dims()) * int64_t(elem)});
    }
    ConcatRows(ctx.eigen_cpu_device(), srcs, DimProduct(out_shape, 0, axis), Bytes(*out));
    return absl::OkStatus();
  }
};

// Pack: ConcatV2 of the inputs each given a dim of 1 at `axis`.
class PackOp : public OpKernel {
 public:
  explicit PackOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("axis", &axis_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const int n = num_inputs();
    std::vector<PartialTensorShape> shapes;
    for (int i = 0; i < n; ++i) shapes.push_back(ctx.input(i).shape());
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_p, PackOutputShape(shapes, axis_));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, out_p.AsTensorShape());
    STRATA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_, out_shape.dims(), "Pack axis"));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    const TensorShape& in_shape = ctx.input(0).shape();
    const int64_t row_bytes =
        DimProduct(in_shape, axis, in_shape.dims()) * int64_t(DataTypeSize(input_type(0)));
    std::vector<RowSource> srcs;
    for (int i = 0; i < n; ++i) srcs.push_back({Bytes(ctx.input(i)), row_bytes});
    ConcatRows(ctx.eigen_cpu_device(), srcs, DimProduct(in_shape, 0, axis), Bytes(*out));
    return absl::OkStatus();
  }

 private:
  int64_t axis_ = 0;
};

// Slice: the output is made of contiguous runs of the input. The run spans
// the innermost dims the slice takes whole, plus the next one in part; the
// dims outside it are walked with a StridedWalker.
class SliceOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    for (int i = 1; i <= 2; ++i) {
      if (ctx.input(i).dims() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "Slice ", i == 1 ? "begin" : "size", " must be 1-D, got shape ",
            ctx.input(i).shape().DebugString()));
      }
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> begin, IntTensorValues(ctx.input(1), "begin"));
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> size, IntTensorValues(ctx.input(2), "size"));
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_p, SliceOutputShape(in.shape(), begin, size));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, out_p.AsTensorShape());
    if (out_shape == in.shape()) {  // the whole input: share its buffer
      ctx.set_output(0, in);
      return absl::OkStatus();
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    if (out->NumElements() == 0) return absl::OkStatus();

    const int rank = in.dims();
    const int64_t elem = DataTypeSize(in.dtype());
    // Dims k+1.. are taken whole (begin 0); the run is size[k] * their product.
    int k = rank - 1;
    int64_t run = out_shape.dim_size(k);
    while (k > 0 && out_shape.dim_size(k) == in.dim_size(k)) {
      --k;
      run *= out_shape.dim_size(k);
    }
    const std::vector<int64_t> in_strides = array_copy::RowMajorStrides(in.shape().dim_sizes());
    int64_t base = 0;
    for (int i = 0; i < rank; ++i) base += begin[i] * in_strides[i];
    const std::vector<int64_t> outer_dims(out_shape.dim_sizes().begin(),
                                          out_shape.dim_sizes().begin() + k);
    const std::vector<int64_t> outer_strides(in_strides.begin(), in_strides.begin() + k);
    const int64_t runs = DimProduct(out_shape, 0, k);
    const char* src = Bytes(in);
    char* dst = Bytes(*out);
    const int64_t run_bytes = run * elem;
    ctx.eigen_cpu_device().parallelFor(
        runs, array_copy::CopyCost(run_bytes), [&](Eigen::Index first, Eigen::Index last) {
          array_copy::StridedWalker w(outer_dims, outer_strides, first, base);
          for (Eigen::Index r = first; r < last; ++r, w.Next()) {
            std::memcpy(dst + r * run_bytes, src + w.offset() * elem, run_bytes);
          }
        });
    return absl::OkStatus();
  }
};

// OneHot: the output is off_value everywhere but at [prefix, index, suffix]
// for each valid index; indices outside [0, depth) give a row of off_value.
class OneHotOp : public OpKernel {
 public:
  explicit OneHotOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("axis", &axis_));
  }
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& indices = ctx.input(0);
    STRATA_RETURN_IF_ERROR(RequireScalar(ctx.input(1), "OneHot depth"));
    STRATA_RETURN_IF_ERROR(RequireScalar(ctx.input(2), "OneHot on_value"));
    STRATA_RETURN_IF_ERROR(RequireScalar(ctx.input(3), "OneHot off_value"));
    const int64_t depth = *ctx.input(1).data<int32_t>();
    if (depth < 0) {
      return absl::InvalidArgumentError(absl::StrCat("OneHot depth must be >= 0, got ", depth));
    }
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_p,
                            OneHotOutputShape(indices.shape(), depth, axis_));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, out_p.AsTensorShape());
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    const size_t elem = DataTypeSize(output_type(0));
    FillPattern(ctx.eigen_cpu_device(), Bytes(*out), out->NumElements(), ctx.input(3).raw_data(),
                elem);
    if (out->NumElements() == 0) return absl::OkStatus();

    const int axis = axis_ == -1 ? indices.dims() : static_cast<int>(axis_);
    const int64_t prefix = DimProduct(indices.shape(), 0, axis);
    const int64_t suffix = DimProduct(indices.shape(), axis, indices.dims());
    std::vector<int64_t> idx(static_cast<size_t>(indices.NumElements()));
    switch (indices.dtype()) {
      case DT_UINT8: Widen(indices.data<uint8_t>(), &idx); break;
      case DT_INT8: Widen(indices.data<int8_t>(), &idx); break;
      case DT_INT32: Widen(indices.data<int32_t>(), &idx); break;
      case DT_INT64: Widen(indices.data<int64_t>(), &idx); break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(
            "OneHot indices must be uint8, int8, int32 or int64, got ",
            DataTypeString(indices.dtype())));
    }
    const char* on = Bytes(ctx.input(2));
    char* dst = Bytes(*out);
    for (int64_t p = 0; p < prefix; ++p) {
      for (int64_t s = 0; s < suffix; ++s) {
        const int64_t d = idx[p * suffix + s];
        if (d < 0 || d >= depth) continue;
        std::memcpy(dst + ((p * depth + d) * suffix + s) * elem, on, elem);
      }
    }
    return absl::OkStatus();
  }

 private:
  template <typename I>
  static void Widen(const I* v, std::vector<int64_t>* out) {
    for (size_t i = 0; i < out->size(); ++i) (*out)[i] = static_cast<int64_t>(v[i]);
  }
  int64_t axis_ = -1;
};

// Range: start, start + delta, ... while before limit.
class RangeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    for (int i = 0; i < 3; ++i) STRATA_RETURN_IF_ERROR(RequireScalar(ctx.input(i), "Range start, limit and delta"));
    switch (ctx.input(0).dtype()) {
      case DT_FLOAT: return Fill<float>(ctx);
      case DT_DOUBLE: return Fill<double>(ctx);
      case DT_INT32: return Fill<int32_t>(ctx);
      case DT_INT64: return Fill<int64_t>(ctx);
      default:
        return absl::InvalidArgumentError(absl::StrCat("Range: unsupported type ", DataTypeString(ctx.input(0).dtype())));
    }
  }

 private:
  template <typename T>
  static absl::Status Fill(OpKernelContext& ctx) {
    const T start = *ctx.input(0).data<T>(), limit = *ctx.input(1).data<T>(), delta = *ctx.input(2).data<T>();
    absl::StatusOr<int64_t> n = std::is_integral<T>::value
                                    ? RangeLength(static_cast<int64_t>(start), static_cast<int64_t>(limit),
                                                  static_cast<int64_t>(delta))
                                    : RangeLength(static_cast<double>(start), static_cast<double>(limit),
                                                  static_cast<double>(delta));
    if (!n.ok()) return n.status();
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, TensorShape{*n}, &out));
    T* o = out->data<T>();
    for (int64_t i = 0; i < *n; ++i) o[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    return absl::OkStatus();
  }
};

// Tile: the input repeated multiples[i] times along each dim i. The
// innermost dim is copied a row at a time; outer dims repeat whole blocks
// of the output already written.
class TileOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    STRATA_RETURN_IF_ERROR(RequireVector(ctx.input(1), "Tile multiples"));
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> multiples, IntTensorValues(ctx.input(1), "Tile multiples"));
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_p, TileOutputShape(in.shape(), multiples));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, out_p.AsTensorShape());
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    if (out->NumElements() == 0) return absl::OkStatus();
    if (in.dims() == 0) {
      std::memcpy(Bytes(*out), Bytes(in), in.TotalBytes());
      return absl::OkStatus();
    }
    elem_ = DataTypeSize(in.dtype());
    Copy(in, multiples, 0, Bytes(in), Bytes(*out));
    return absl::OkStatus();
  }

 private:
  // Writes the tiling of the input's block at dim `d` (starting at `src`)
  // to `dst`; returns the bytes written.
  size_t Copy(const Tensor& in, const std::vector<int64_t>& m, int d, const char* src, char* dst) const {
    const int last = in.dims() - 1;
    size_t in_block = elem_;  // bytes of one index of dim d in the input
    for (int i = d + 1; i < in.dims(); ++i) in_block *= static_cast<size_t>(in.dim_size(i));
    char* start = dst;
    if (d == last) {
      const size_t row = in_block * static_cast<size_t>(in.dim_size(d));
      for (int64_t r = 0; r < m[d]; ++r, dst += row) std::memcpy(dst, src, row);
      return static_cast<size_t>(dst - start);
    }
    for (int64_t i = 0; i < in.dim_size(d); ++i) dst += Copy(in, m, d + 1, src + i * in_block, dst);
    const size_t once = static_cast<size_t>(dst - start);
    for (int64_t r = 1; r < m[d]; ++r, dst += once) std::memcpy(dst, start, once);
    return static_cast<size_t>(dst - start);
  }
  size_t elem_ = 0;
};

// Split and SplitV: each output takes its run of the input along the axis
// from every outer row.
template <bool kSizes>
class SplitOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(kSizes ? 0 : 1);
    const Tensor& axis_t = ctx.input(kSizes ? 2 : 0);
    STRATA_RETURN_IF_ERROR(RequireScalar(axis_t, "split_dim"));
    const int64_t axis_v = *axis_t.data<int32_t>();
    std::vector<int64_t> sizes;
    if (kSizes) {
      STRATA_RETURN_IF_ERROR(RequireVector(ctx.input(1), "SplitV size_splits"));
      const Tensor& s = ctx.input(1);
      if (s.dtype() == DT_INT8) {
        for (int64_t i = 0; i < s.NumElements(); ++i) sizes.push_back(s.data<int8_t>()[i]);
      } else {
        STRATA_ASSIGN_OR_RETURN(sizes, IntTensorValues(s, "SplitV size_splits"));
      }
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<PartialTensorShape> shapes,
                            SplitOutputShapes(in.shape(), axis_v, num_outputs(), sizes));
    STRATA_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_v, in.dims(), "split_dim"));
    const int64_t outer = DimProduct(in.shape(), 0, axis);
    const size_t inner = static_cast<size_t>(DimProduct(in.shape(), axis + 1, in.dims())) * DataTypeSize(in.dtype());
    const size_t in_row = inner * static_cast<size_t>(in.dim_size(axis));
    size_t offset = 0;
    for (int k = 0; k < num_outputs(); ++k) {
      STRATA_ASSIGN_OR_RETURN(TensorShape shape, shapes[k].AsTensorShape());
      Tensor* out;
      STRATA_RETURN_IF_ERROR(ctx.allocate_output(k, shape, &out));
      const size_t row = inner * static_cast<size_t>(shape.dim_size(axis));
      for (int64_t r = 0; r < outer && row > 0; ++r) {
        std::memcpy(Bytes(*out) + r * row, Bytes(in) + r * in_row + offset, row);
      }
      offset += row;
    }
    return absl::OkStatus();
  }
};

// MatrixBandPart: each matrix row copied, its out-of-band ends zeroed.
class MatrixBandPartOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (in.dims() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("MatrixBandPart input must be at least 2-D, got shape ", in.shape().DebugString()));
    }
    STRATA_RETURN_IF_ERROR(RequireScalar(ctx.input(1), "MatrixBandPart num_lower"));
    STRATA_RETURN_IF_ERROR(RequireScalar(ctx.input(2), "MatrixBandPart num_upper"));
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> lower, IntTensorValues(ctx.input(1), "MatrixBandPart num_lower"));
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> upper, IntTensorValues(ctx.input(2), "MatrixBandPart num_upper"));
    const int64_t m = in.dim_size(in.dims() - 2), n = in.dim_size(in.dims() - 1);
    STRATA_RETURN_IF_ERROR(CheckBandBounds(in.shape(), lower[0], upper[0]));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, in.shape(), &out));
    if (out->NumElements() == 0) return absl::OkStatus();
    const size_t elem = DataTypeSize(in.dtype());
    const int64_t rows = in.NumElements() / n;
    const char* src = Bytes(in);
    char* dst = Bytes(*out);
    ctx.eigen_cpu_device().parallelFor(
        rows, array_copy::CopyCost(n * static_cast<int64_t>(elem)), [&](Eigen::Index first, Eigen::Index last) {
          for (Eigen::Index r = first; r < last; ++r) {
            const int64_t i = r % m;
            const int64_t lo = lower[0] < 0 ? 0 : std::clamp<int64_t>(i - lower[0], 0, n);
            const int64_t hi = upper[0] < 0 ? n : std::clamp<int64_t>(i + upper[0] + 1, 0, n);
            char* row = dst + r * n * static_cast<int64_t>(elem);
            const char* in_row = src + r * n * static_cast<int64_t>(elem);
            std::memset(row, 0, n * elem);
            if (hi > lo) std::memcpy(row + lo * elem, in_row + lo * elem, (hi - lo) * elem);
          }
        });
    return absl::OkStatus();
  }
};

// No dtype constraints: each kernel serves every dtype the op allows.
// ExpandDims and Squeeze: kernels/shape_change_kernels.h.
class ExpandDimsOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    return ExpandDimsCompute(ctx, ctx.input(1));
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("Reshape").Device(kDeviceCpu), ReshapeOp);
STRATA_REGISTER_KERNEL(KernelBuilder("ExpandDims").Device(kDeviceCpu), ExpandDimsOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Squeeze").Device(kDeviceCpu), SqueezeOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Shape").Device(kDeviceCpu), ShapeOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Fill").Device(kDeviceCpu), FillOp);
STRATA_REGISTER_KERNEL(KernelBuilder("ZerosLike").Device(kDeviceCpu), ConstantLikeOp<false>);
STRATA_REGISTER_KERNEL(KernelBuilder("OnesLike").Device(kDeviceCpu), ConstantLikeOp<true>);
STRATA_REGISTER_KERNEL(KernelBuilder("ConcatV2").Device(kDeviceCpu), ConcatV2Op);
STRATA_REGISTER_KERNEL(KernelBuilder("Pack").Device(kDeviceCpu), PackOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Slice").Device(kDeviceCpu), SliceOp);
STRATA_REGISTER_KERNEL(KernelBuilder("OneHot").Device(kDeviceCpu), OneHotOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Range").Device(kDeviceCpu), RangeOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Tile").Device(kDeviceCpu), TileOp);
STRATA_REGISTER_KERNEL(KernelBuilder("MatrixBandPart").Device(kDeviceCpu), MatrixBandPartOp);
STRATA_REGISTER_KERNEL(KernelBuilder("Split").Device(kDeviceCpu), SplitOp<false>);
STRATA_REGISTER_KERNEL(KernelBuilder("SplitV").Device(kDeviceCpu), SplitOp<true>);

}  // namespace
}  // namespace strata
