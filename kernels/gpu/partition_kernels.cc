// DynamicPartition and DynamicStitch on the GPU. Partitions and indices are
// int32, so in host memory: the host checks them (kernels/partition_checks.h,
// the CPU kernels' checks and messages), works out where every slice goes, and
// the device moves the slices with the gather launcher (gather_gpu.h), one
// launch per output. Data in host memory (int32) is moved on the host. The
// output shapes depend on the index values, so neither kernel is recorded
// into a step graph.
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "kernels/gpu/gather_gpu.h"
#include "kernels/gpu/gpu_util.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"
#include "kernels/partition_checks.h"

namespace strata {
namespace gpu {
namespace {

char* Bytes(const Tensor& t) { return static_cast<char*>(t.raw_data()); }

// out's rows are data's rows `rows` (each `slice` bytes; a row of -1 is
// zeros), moved where the dtype lives.
absl::Status GatherSlices(OpKernelContext& ctx, const Tensor& data, int64_t data_rows,
                          int64_t slice, const std::vector<int64_t>& rows, Tensor* out) {
  if (rows.empty() || slice == 0) return absl::OkStatus();
  if (OnHost(ctx, data.dtype())) {
    for (size_t r = 0; r < rows.size(); ++r) {
      char* dst = Bytes(*out) + static_cast<int64_t>(r) * slice;
      if (rows[r] < 0) {
        std::memset(dst, 0, static_cast<size_t>(slice));
      } else {
        std::memcpy(dst, Bytes(data) + rows[r] * slice, static_cast<size_t>(slice));
      }
    }
    return absl::OkStatus();
  }
  const Tensor host_rows = Tensor::FromVector<int64_t>(rows);
  Tensor dev_rows;
  STRATA_RETURN_IF_ERROR(AllocateDeviceTemp(ctx, DT_INT64, host_rows.shape(), &dev_rows));
  STRATA_RETURN_IF_ERROR(CopyHostToDevice(ctx, host_rows, &dev_rows));
  STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
  return CudaStatus(
      LaunchGather(data.raw_data(), dev_rows.raw_data(), /*indices_int64=*/true, out->raw_data(),
                   /*outer=*/1, data_rows, static_cast<int64_t>(rows.size()), slice, s),
      ctx.op_kernel().type_string().c_str());
}

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
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> counts,
                            CountPartitions(partitions, num_partitions_));
    std::vector<std::vector<int64_t>> rows(counts.size());
    const int32_t* p = partitions.data<int32_t>();
    for (int64_t j = 0; j < partitions.NumElements(); ++j) rows[p[j]].push_back(j);
    const int64_t slice = SliceBytes(data.shape(), partitions.dims(), data.dtype());
    for (int i = 0; i < num_partitions_; ++i) {
      STRATA_ASSIGN_OR_RETURN(
          PartialTensorShape shape,
          DynamicPartitionOutputShape(data.shape(), partitions.shape(), counts[i]));
      STRATA_ASSIGN_OR_RETURN(TensorShape full, shape.AsTensorShape());
      Tensor* out;
      STRATA_RETURN_IF_ERROR(AllocateOutput(ctx, i, full, &out));
      STRATA_RETURN_IF_ERROR(
          GatherSlices(ctx, data, partitions.NumElements(), slice, rows[i], out));
    }
    return absl::OkStatus();
  }

 private:
  int64_t num_partitions_ = 0;
};

// merged[indices[m][i...], ...] = data[m][i..., ...], later m and later
// positions winning; rows no index names are zeros. With several inputs the
// data are first laid end to end in one device buffer, so that one gather
// fills merged (a row nobody names gathers index -1: zeros).
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
    Tensor* merged;
    STRATA_RETURN_IF_ERROR(AllocateOutput(ctx, 0, merged_shape, &merged));
    const DataType dt = input_type(n);
    const int64_t slice = SliceBytes(data[0].shape(), indices[0].dims(), dt);
    // The source row of each merged row, counting the inputs' rows end to end.
    std::vector<int64_t> source(static_cast<size_t>(merged_shape.dim_size(0)), -1);
    int64_t total = 0;
    for (int m = 0; m < n; ++m) {
      const int32_t* v = indices[m].data<int32_t>();
      for (int64_t i = 0; i < indices[m].NumElements(); ++i) source[v[i]] = total + i;
      total += indices[m].NumElements();
    }
    if (slice == 0 || source.empty()) return absl::OkStatus();
    Tensor all = data[0];
    if (n > 1) {
      STRATA_ASSIGN_OR_RETURN(all, Concatenated(ctx, data, dt, total, slice));
    }
    return GatherSlices(ctx, all, total, slice, source, merged);
  }

 private:
  // data's bytes end to end, where dt lives.
  static absl::StatusOr<Tensor> Concatenated(OpKernelContext& ctx, const std::vector<Tensor>& data,
                                             DataType dt, int64_t rows, int64_t slice) {
    const TensorShape shape{rows * slice / static_cast<int64_t>(DataTypeSize(dt))};
    Tensor all;
    if (OnHost(ctx, dt)) {
      all = Tensor(dt, shape);
    } else {
      STRATA_RETURN_IF_ERROR(AllocateDeviceTemp(ctx, dt, shape, &all));
    }
    STRATA_ASSIGN_OR_RETURN(cudaStream_t s, Stream(ctx));
    size_t offset = 0;
    for (const Tensor& d : data) {
      if (d.TotalBytes() == 0) continue;
      if (OnHost(ctx, dt)) {
        std::memcpy(Bytes(all) + offset, d.raw_data(), d.TotalBytes());
      } else {
        STRATA_RETURN_IF_ERROR(
            CudaStatus(cudaMemcpyAsync(Bytes(all) + offset, d.raw_data(), d.TotalBytes(),
                                       cudaMemcpyDeviceToDevice, s),
                       "DynamicStitch"));
      }
      offset += d.TotalBytes();
    }
    return all;
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("DynamicPartition").Device(kDeviceGpu), DynamicPartitionOp);
STRATA_REGISTER_KERNEL(KernelBuilder("DynamicStitch").Device(kDeviceGpu), DynamicStitchOp);

}  // namespace
}  // namespace gpu
}  // namespace strata
