// DynamicPartition and DynamicStitch on the CPU (graph/ops/array_ops.h).
// Both move whole slices (the elements after the index dims) and never look
// at element values, so, as the other array kernels (array_copy.h), one
// kernel serves every dtype and copies bytes. The checks are the ones the GPU
// kernels make (kernels/partition_checks.h), on the shape rules the shape
// functions use, so all reject the same inputs.
//
// Every index is checked before anything is written; a bad one is
// InvalidArgument naming the op, its position and its value.
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "kernels/partition_checks.h"

namespace strata {
namespace {

char* Bytes(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

// Output i gets, in row-major order of j, the slices data[j...] with
// partitions[j...] == i.
class DynamicPartitionOp : public OpKernel {
 public:
  explicit DynamicPartitionOp(OpKernelConstruction& c) : OpKernel(c) {
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("num_partitions", &num_partitions_));
  }

  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& data = ctx.input(0);
    const Tensor& partitions = ctx.input(1);
    STRATA_RETURN_IF_ERROR(
        DynamicPartitionOutputShape(data.shape(), partitions.shape(), 0).status());
    // 1. Check every partition value and count each partition's slices.
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> counts,
                            CountPartitions(partitions, num_partitions_));
    // 2. Allocate the outputs.
    std::vector<char*> next(counts.size());
    for (int i = 0; i < num_partitions_; ++i) {
      STRATA_ASSIGN_OR_RETURN(
          PartialTensorShape shape,
          DynamicPartitionOutputShape(data.shape(), partitions.shape(), counts[i]));
      STRATA_ASSIGN_OR_RETURN(TensorShape full, shape.AsTensorShape());
      Tensor* out;
      STRATA_RETURN_IF_ERROR(ctx.allocate_output(i, full, &out));
      next[i] = Bytes(*out);
    }
    // 3. Copy each slice to the end of its partition.
    const int64_t slice = SliceBytes(data.shape(), partitions.dims(), data.dtype());
    if (slice == 0) return absl::OkStatus();
    const char* src = Bytes(data);
    const int32_t* p = partitions.data<int32_t>();
    for (int64_t j = 0; j < partitions.NumElements(); ++j) {
      std::memcpy(next[p[j]], src + j * slice, static_cast<size_t>(slice));
      next[p[j]] += slice;
    }
    return absl::OkStatus();
  }

 private:
  int64_t num_partitions_ = 0;
};

// merged[indices[m][i...], ...] = data[m][i..., ...], later m and later
// positions winning; rows no index names are zeros (TensorFlow leaves them
// uninitialized).
class DynamicStitchOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext& ctx) override {
    const int n = num_inputs() / 2;
    std::vector<Tensor> indices, data;
    for (int m = 0; m < n; ++m) {
      indices.push_back(ctx.input(m));
      data.push_back(ctx.input(n + m));
    }
    STRATA_ASSIGN_OR_RETURN(TensorShape merged_shape,
                            StitchedShape(indices, data, ctx.allocator()));
    // Zeros, then every slice at its row in input order.
    Tensor* merged;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, merged_shape, &merged));
    const int64_t slice = SliceBytes(data[0].shape(), indices[0].dims(), input_type(n));
    const int64_t rows = merged_shape.dim_size(0);
    if (slice == 0 || rows == 0) return absl::OkStatus();
    char* dst = Bytes(*merged);
    std::memset(dst, 0, static_cast<size_t>(rows * slice));
    for (int m = 0; m < n; ++m) {
      const int32_t* v = indices[m].data<int32_t>();
      const char* src = Bytes(data[m]);
      for (int64_t i = 0; i < indices[m].NumElements(); ++i) {
        std::memcpy(dst + v[i] * slice, src + i * slice, static_cast<size_t>(slice));
      }
    }
    return absl::OkStatus();
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("DynamicPartition").Device(kDeviceCpu), DynamicPartitionOp);
STRATA_REGISTER_KERNEL(KernelBuilder("DynamicStitch").Device(kDeviceCpu), DynamicStitchOp);

}  // namespace
}  // namespace strata
