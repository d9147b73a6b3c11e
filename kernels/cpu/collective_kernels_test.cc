// The collective kernels describe the collective correctly to the executor
// and fail clearly without one. The collectives themselves are tested in
// runtime/collective/.
#include <memory>
#include <vector>

#include "graph/op_registry.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "kernels/collective.h"
#include "kernels/kernel_registry.h"
#include "kernels/kernel_runner.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

// Records the params and answers with the input plus one (or a fixed tensor
// for a broadcast receive).
class RecordingExecutor : public CollectiveExecutor {
 public:
  void ExecuteAsync(const CollectiveParams& params, Tensor input, Allocator* allocator,
                    CancellationManager*, DoneCallback done) override {
    seen = params;
    Tensor out(allocator, params.dtype, params.shape);
    for (int64_t i = 0; i < out.NumElements(); ++i) {
      out.data<float>()[i] = input.IsInitialized() ? input.data<float>()[i] + 1 : 42.0f;
    }
    done(absl::OkStatus(), out);
  }
  CollectiveParams seen;
};

// Runs `op` through ComputeAsync with `executor` in the context.
absl::StatusOr<Tensor> RunCollective(const std::string& op, const std::vector<Tensor>& inputs,
                           std::map<std::string, AttrValue> attrs, CollectiveExecutor* executor,
                           int64_t step_id = 5) {
  static StandaloneCpuDevice* device = new StandaloneCpuDevice(1);
  auto def = OpRegistry::Global()->LookUp(op);
  if (!def.ok()) return def.status();
  ::tensorflow::NodeDef node;
  node.set_name("coll");
  node.set_op(op);
  for (auto& kv : attrs) (*node.mutable_attr())[kv.first] = kv.second;
  absl::Status s = ValidateAndCompleteAttrs(**def, &node);
  if (!s.ok()) return s;
  std::vector<DataType> in_types, out_types;
  s = InOutTypesForNode(node, **def, &in_types, &out_types);
  if (!s.ok()) return s;
  auto kernel = CreateOpKernel(device, node, **def, in_types, out_types);
  if (!kernel.ok()) return kernel.status();
  std::vector<Tensor> in = inputs;
  OpKernelContext::Params p;
  p.op_kernel = kernel->get();
  p.device = device;
  p.inputs = in.data();
  p.step_id = step_id;
  p.collective_executor = executor;
  OpKernelContext ctx(p);
  s = (*kernel)->Compute(ctx);
  if (!s.ok()) return s;
  return ctx.outputs()[0];
}

TEST(CollectiveKernelsTest, ReduceHandsItsParamsToTheExecutor) {
  RecordingExecutor ex;
  auto out = RunCollective("CollectiveReduceV2",
                 {Tensor::FromVector<float>({1, 2, 3}), Tensor::Scalar<int32_t>(4),
                  Tensor::Scalar<int32_t>(9), Tensor::Scalar<int32_t>(11)},
                 {{"T", MakeAttr(DT_FLOAT)}, {"merge_op", MakeAttr("Min")}, {"final_op", MakeAttr("Div")},
                  {"communication_hint", MakeAttr("ring")}, {"timeout_seconds", MakeAttr(1.5f)}},
                 &ex);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->data<float>()[2], 4.0f);
  EXPECT_EQ(ex.seen.type, CollectiveType::kAllReduce);
  EXPECT_EQ(ex.seen.group_size, 4);
  EXPECT_EQ(ex.seen.group_key, 9);
  EXPECT_EQ(ex.seen.instance_key, 11);
  EXPECT_EQ(ex.seen.step_id, 5);
  EXPECT_EQ(ex.seen.merge_op, MergeOp::kMin);
  EXPECT_EQ(ex.seen.final_op, FinalOp::kDiv);
  EXPECT_EQ(ex.seen.communication_hint, "ring");
  EXPECT_FLOAT_EQ(ex.seen.timeout_seconds, 1.5f);
  EXPECT_EQ(ex.seen.dtype, DT_FLOAT);
  EXPECT_EQ(ex.seen.shape, TensorShape({3}));
  EXPECT_EQ(ex.seen.device, "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(ex.seen.node_name, "coll");
}

TEST(CollectiveKernelsTest, BroadcastRecvReadsItsShapeInput) {
  RecordingExecutor ex;
  auto out = RunCollective("CollectiveBcastRecvV2",
                 {Tensor::Scalar<int32_t>(2), Tensor::Scalar<int32_t>(1), Tensor::Scalar<int32_t>(3),
                  Tensor::FromVector<int64_t>({2, 2})},
                 {{"T", MakeAttr(DT_FLOAT)}, {"Tshape", MakeAttr(DT_INT64)}}, &ex);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(ex.seen.type, CollectiveType::kBroadcastRecv);
  EXPECT_EQ(ex.seen.shape, TensorShape({2, 2}));
  EXPECT_EQ(out->shape(), TensorShape({2, 2}));
  EXPECT_EQ(out->data<float>()[3], 42.0f);
}

TEST(CollectiveKernelsTest, GatherAndSendNameTheirType) {
  RecordingExecutor ex;
  std::vector<Tensor> in = {Tensor::FromVector<float>({1}), Tensor::Scalar<int32_t>(1),
                            Tensor::Scalar<int32_t>(1), Tensor::Scalar<int32_t>(1)};
  ASSERT_TRUE(RunCollective("CollectiveGatherV2", in, {{"T", MakeAttr(DT_FLOAT)}}, &ex).ok());
  EXPECT_EQ(ex.seen.type, CollectiveType::kAllGather);
  ASSERT_TRUE(RunCollective("CollectiveBcastSendV2", in, {{"T", MakeAttr(DT_FLOAT)}}, &ex).ok());
  EXPECT_EQ(ex.seen.type, CollectiveType::kBroadcastSend);
}

TEST(CollectiveKernelsTest, WithoutAnExecutorFailsWithFailedPrecondition) {
  StandaloneCpuDevice dev;
  auto out = RunKernelWithListInputs(
      &dev, "CollectiveReduceV2",
      {{Tensor::FromVector<float>({1})}, {Tensor::Scalar<int32_t>(1)}, {Tensor::Scalar<int32_t>(1)},
       {Tensor::Scalar<int32_t>(1)}, {}},
      {{"merge_op", MakeAttr("Add")}, {"final_op", MakeAttr("Id")}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  EXPECT_NE(std::string(out.status().message()).find("collective executor"), std::string::npos);
}

TEST(CollectiveKernelsTest, BadGroupSizeIsInvalidArgument) {
  RecordingExecutor ex;
  auto out = RunCollective("CollectiveReduceV2",
                 {Tensor::FromVector<float>({1}), Tensor::Scalar<int32_t>(0),
                  Tensor::Scalar<int32_t>(1), Tensor::Scalar<int32_t>(1)},
                 {{"T", MakeAttr(DT_FLOAT)}, {"merge_op", MakeAttr("Add")}, {"final_op", MakeAttr("Id")}},
                 &ex);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
}

TEST(CollectiveKernelsTest, BadFinalOpFailsAtConstruction) {
  RecordingExecutor ex;
  auto out = RunCollective("CollectiveReduceV2",
                 {Tensor::FromVector<float>({1}), Tensor::Scalar<int32_t>(1),
                  Tensor::Scalar<int32_t>(1), Tensor::Scalar<int32_t>(1)},
                 {{"T", MakeAttr(DT_FLOAT)}, {"merge_op", MakeAttr("Add")}, {"final_op", MakeAttr("Mean")}},
                 &ex);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
}

}  // namespace
}  // namespace strata
