// The GPU collective kernels (kernels/gpu/collective_kernels_gpu.cc) on a
// stand-in GPU device whose memory is host memory: they are registered for
// "GPU", describe the collective to the executor as the CPU kernels do, and
// reject what cannot run on a GPU. Needs no GPU.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "base/status.h"
#include "graph/allocator.h"
#include "graph/op_registry.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "kernels/collective.h"
#include "kernels/device_base.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

class StandInGpu : public DeviceBase {
 public:
  const std::string& name() const override { return name_; }
  const std::string& device_type() const override { return type_; }
  Allocator* allocator() const override { return &allocator_; }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return nullptr; }
  const GpuDeviceContext* gpu_context() const override { return &ctx_; }

 private:
  const std::string name_ = "/job:localhost/replica:0/task:0/device:GPU:0";
  const std::string type_ = kDeviceGpu;
  mutable TrackingCpuAllocator allocator_{"stand-in GPU"};
  GpuDeviceContext ctx_;
};

class RecordingExecutor : public CollectiveExecutor {
 public:
  void ExecuteAsync(const CollectiveParams& params, Tensor input, Allocator* allocator,
                    CancellationManager*, DoneCallback done) override {
    seen = params;
    saw_input = input.IsInitialized();
    done(absl::OkStatus(), Tensor(allocator, params.dtype, params.shape));
  }
  CollectiveParams seen;
  bool saw_input = false;
};

absl::StatusOr<Tensor> RunOp(const std::string& op, std::vector<Tensor> in,
                             std::map<std::string, AttrValue> attrs, CollectiveExecutor* executor) {
  static StandInGpu* device = new StandInGpu;
  STRATA_ASSIGN_OR_RETURN(const OpDef* def, OpRegistry::Global()->LookUp(op));
  ::tensorflow::NodeDef node;
  node.set_name("coll");
  node.set_op(op);
  for (auto& kv : attrs) (*node.mutable_attr())[kv.first] = kv.second;
  STRATA_RETURN_IF_ERROR(ValidateAndCompleteAttrs(*def, &node));
  std::vector<DataType> in_types, out_types;
  STRATA_RETURN_IF_ERROR(InOutTypesForNode(node, *def, &in_types, &out_types));
  STRATA_ASSIGN_OR_RETURN(auto kernel, CreateOpKernel(device, node, *def, in_types, out_types));
  OpKernelContext::Params p;
  p.op_kernel = kernel.get();
  p.device = device;
  p.inputs = in.data();
  p.step_id = 3;
  p.collective_executor = executor;
  OpKernelContext ctx(p);
  STRATA_RETURN_IF_ERROR(kernel->Compute(ctx));
  return ctx.outputs()[0];
}

std::vector<Tensor> Keys(Tensor data, int size, int group, int instance) {
  return {std::move(data), Tensor::Scalar<int32_t>(size), Tensor::Scalar<int32_t>(group),
          Tensor::Scalar<int32_t>(instance)};
}

TEST(CollectiveKernelsGpuTest, ReduceDescribesTheCollectiveOnTheGpuDevice) {
  RecordingExecutor ex;
  auto out = RunOp("CollectiveReduceV2", Keys(Tensor::FromVector<float>({1, 2, 3}), 8, 2, 17),
                 {{"T", MakeAttr(DT_FLOAT)}, {"merge_op", MakeAttr("Add")}, {"final_op", MakeAttr("Div")},
                  {"communication_hint", MakeAttr("nccl")}, {"timeout_seconds", MakeAttr(2.0f)}},
                 &ex);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->shape(), TensorShape({3}));
  EXPECT_EQ(ex.seen.type, CollectiveType::kAllReduce);
  EXPECT_EQ(ex.seen.group_size, 8);
  EXPECT_EQ(ex.seen.group_key, 2);
  EXPECT_EQ(ex.seen.instance_key, 17);
  EXPECT_EQ(ex.seen.step_id, 3);
  EXPECT_EQ(ex.seen.final_op, FinalOp::kDiv);
  EXPECT_EQ(ex.seen.communication_hint, "nccl");
  EXPECT_EQ(ex.seen.device, "/job:localhost/replica:0/task:0/device:GPU:0");
  EXPECT_TRUE(ex.saw_input);
}

TEST(CollectiveKernelsGpuTest, GatherSendAndRecvAreRegistered) {
  RecordingExecutor ex;
  ASSERT_TRUE(RunOp("CollectiveGatherV2", Keys(Tensor::FromVector<double>({1}), 1, 1, 1),
                  {{"T", MakeAttr(DT_DOUBLE)}}, &ex).ok());
  EXPECT_EQ(ex.seen.type, CollectiveType::kAllGather);
  ASSERT_TRUE(RunOp("CollectiveBcastSendV2", Keys(Tensor::FromVector<int64_t>({1}), 1, 1, 2),
                  {{"T", MakeAttr(DT_INT64)}}, &ex).ok());
  EXPECT_EQ(ex.seen.type, CollectiveType::kBroadcastSend);
  auto out = RunOp("CollectiveBcastRecvV2",
                 {Tensor::Scalar<int32_t>(2), Tensor::Scalar<int32_t>(1), Tensor::Scalar<int32_t>(3),
                  Tensor::FromVector<int32_t>({2, 5})},
                 {{"T", MakeAttr(DT_FLOAT)}}, &ex);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ex.seen.type, CollectiveType::kBroadcastRecv);
  EXPECT_EQ(ex.seen.shape, TensorShape({2, 5}));
  EXPECT_FALSE(ex.saw_input);
}

TEST(CollectiveKernelsGpuTest, HostMemoryTypesHaveNoGpuKernel) {
  RecordingExecutor ex;
  // int32 data lives in host memory on a GPU device: no NCCL kernel for it.
  auto out = RunOp("CollectiveReduceV2", Keys(Tensor::FromVector<int32_t>({1}), 1, 1, 1),
                 {{"T", MakeAttr(DT_INT32)}, {"merge_op", MakeAttr("Add")}, {"final_op", MakeAttr("Id")}},
                 &ex);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound) << out.status();
  // An int64 shape would live in device memory.
  out = RunOp("CollectiveBcastRecvV2",
            {Tensor::Scalar<int32_t>(2), Tensor::Scalar<int32_t>(1), Tensor::Scalar<int32_t>(3),
             Tensor::FromVector<int64_t>({2})},
            {{"T", MakeAttr(DT_FLOAT)}, {"Tshape", MakeAttr(DT_INT64)}}, &ex);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound) << out.status();
}

TEST(CollectiveKernelsGpuTest, BadKeysAndNoExecutorAreClearErrors) {
  RecordingExecutor ex;
  auto out = RunOp("CollectiveGatherV2", Keys(Tensor::FromVector<float>({1}), 0, 1, 1),
                 {{"T", MakeAttr(DT_FLOAT)}}, &ex);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  out = RunOp("CollectiveGatherV2", Keys(Tensor::Scalar<float>(1), 1, 1, 1), {{"T", MakeAttr(DT_FLOAT)}}, &ex);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  out = RunOp("CollectiveBcastRecvV2",
            {Tensor::Scalar<int32_t>(2), Tensor::Scalar<int32_t>(1), Tensor::Scalar<int32_t>(3),
             Tensor::FromVector<int32_t>({-2})},
            {{"T", MakeAttr(DT_FLOAT)}}, &ex);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  out = RunOp("CollectiveGatherV2", Keys(Tensor::FromVector<float>({1}), 1, 1, 1),
            {{"T", MakeAttr(DT_FLOAT)}}, nullptr);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  EXPECT_TRUE(absl::StrContains(out.status().message(), "GPU:0")) << out.status();
}

}  // namespace
}  // namespace strata
