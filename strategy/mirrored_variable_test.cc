// Mirrored variables: one copy per device, identical initial bits, local
// reads inside Run and primary reads outside, writes to every copy outside
// Run, names without replica prefixes, and the misuse errors.
#include "strategy/mirrored_variable.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "gtest/gtest.h"
#include "strategy/mirrored_strategy.h"
#include "strategy/one_device_strategy.h"
#include "strategy/replica_context.h"
#include "strategy/test_util.h"
#include "train/initializers.h"
#include "train/layers.h"
#include "train/optimizers.h"

namespace strata {
namespace distribute {
namespace {

using testing::CpuSpecs;
using testing::Machine;

std::string Cpu(int i) { return absl::StrCat("/job:localhost/replica:0/task:0/device:CPU:", i); }

// The VarHandleOp an op reads or writes through its first input.
const Node* HandleOf(const Node* n) { return n->input_edge(0)->src; }

TEST(MirroredVariableTest, OneCopyPerDeviceWithTensorFlowNames) {
  auto s = *MirroredStrategy::Create(CpuSpecs(3), Machine(3));
  Scope root = Scope::NewRootScope();
  StrategyScope in_scope = s->Scope();
  train::Variable* v =
      train::CreateVariable(root, "dense/kernel", TensorShape{4, 5}, DT_FLOAT, train::GlorotUniform(3));
  ASSERT_NE(v, nullptr) << root.status();
  auto* m = dynamic_cast<MirroredVariable*>(v);
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->num_components(), 3);
  EXPECT_EQ(m->name(), "dense/kernel");
  EXPECT_EQ(m->device(), Cpu(0));
  EXPECT_EQ(m->handle().node(), m->component(0)->handle().node());
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(m->component(r)->name(), r == 0 ? "dense/kernel" : absl::StrCat("dense/kernel/replica_", r));
    EXPECT_EQ(m->component(r)->device(), Cpu(r));
    EXPECT_EQ(m->component(r)->handle().node()->requested_device(), Cpu(r));
  }
  // The collection holds the logical variable once.
  EXPECT_EQ(train::GlobalVariables(root), std::vector<train::Variable*>{v});
  // Strategies see the copies through train::Variable, without a cast.
  EXPECT_EQ(v->num_replicas(), 3);
  EXPECT_EQ(v->distributed_by(), s.get());
  for (int r = 0; r < 3; ++r) EXPECT_EQ(v->replica(r), m->component(r));
  EXPECT_EQ(v->creation_index(), m->creation_index());
  // A plain variable is its own only copy.
  const train::Variable* plain = m->component(1);
  EXPECT_EQ(plain->num_replicas(), 1);
  EXPECT_EQ(plain->replica(0), plain);
  EXPECT_EQ(plain->distributed_by(), nullptr);
  EXPECT_EQ(plain->creation_index(), -1);
}

TEST(MirroredVariableTest, CopiesStartBitwiseIdentical) {
  auto s = *MirroredStrategy::Create(CpuSpecs(4), Machine(4));
  Scope root = Scope::NewRootScope();
  StrategyScope in_scope = s->Scope();
  // Unseeded random initializers too: the copies take component 0's value.
  std::vector<train::Variable*> vars = {
      train::CreateVariable(root, "glorot", TensorShape{16, 8}, DT_FLOAT, train::GlorotUniform(5)),
      train::CreateVariable(root, "normal", TensorShape{33}, DT_FLOAT, train::RandomNormal()),
      train::CreateVariable(root, "count", TensorShape{}, DT_INT64, train::Constant(7))};
  Node* init = train::GlobalVariablesInitializer(root);
  std::vector<std::string> reads;
  for (train::Variable* v : vars) {
    ASSERT_NE(v, nullptr) << root.status();
    for (int r = 0; r < 4; ++r) {
      reads.push_back(dynamic_cast<MirroredVariable*>(v)->component(r)->Read(root).name());
    }
  }
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = *Session::Create(root, s->session_options());
  {
    absl::Status st = session->Run({}, {}, {init->name()}, nullptr);
    ASSERT_TRUE(st.ok()) << st;
  }
  auto out = testing::Fetch(*session, reads);
  ASSERT_TRUE(out.ok()) << out.status();
  for (size_t k = 0; k < vars.size(); ++k) {
    for (int r = 1; r < 4; ++r) {
      EXPECT_TRUE(testing::SameBits((*out)[k * 4], (*out)[k * 4 + r])) << vars[k]->name() << " " << r;
    }
  }
  EXPECT_EQ(*(*out)[8].data<int64_t>(), 7);
  // The variable's own initializer also initialises every copy.
  EXPECT_EQ(vars[0]->initializer()->in_edges().size(), 4u);
}

TEST(MirroredVariableTest, ReadsAreLocalInsideRunAndPrimaryOutside) {
  auto s = *MirroredStrategy::Create(CpuSpecs(2), Machine(2));
  Scope root = Scope::NewRootScope();
  StrategyScope in_scope = s->Scope();
  auto* m = dynamic_cast<MirroredVariable*>(
      train::CreateVariable(root, "w", TensorShape{2}, DT_FLOAT, train::Ones()));
  ASSERT_NE(m, nullptr) << root.status();
  Output outside = m->Read(root);
  EXPECT_EQ(HandleOf(outside.node()), m->component(0)->handle().node());
  auto result = s->Run(root, [&](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    return ReplicaResult{{m->Read(ctx.scope())}, {}};
  });
  ASSERT_TRUE(result.ok()) << result.status();
  for (int r = 0; r < 2; ++r) {
    const Node* read = result->values[0][r].node();
    EXPECT_EQ(HandleOf(read), m->component(r)->handle().node());
    EXPECT_EQ(read->requested_device(), Cpu(r));
  }
}

TEST(MirroredVariableTest, WritesOutsideRunUpdateEveryCopy) {
  auto s = *MirroredStrategy::Create(CpuSpecs(3), Machine(3));
  Scope root = Scope::NewRootScope();
  StrategyScope in_scope = s->Scope();
  auto* m = dynamic_cast<MirroredVariable*>(
      train::CreateVariable(root, "w", TensorShape{2}, DT_FLOAT, train::Ones()));
  ASSERT_NE(m, nullptr) << root.status();
  Node* init = train::GlobalVariablesInitializer(root);
  Node* assign = m->Assign(root.WithOpName("restore"), ops::Const<float>(root, {5, 6}));
  Node* add = m->AssignAdd(root, ops::Const<float>(root, {1, 1}));
  Node* sub = m->AssignSub(root, ops::Const<float>(root, {0.5f, 0.5f}));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(assign->name(), "restore");
  std::vector<std::string> reads;
  for (int r = 0; r < 3; ++r) reads.push_back(m->component(r)->Read(root).name());
  auto session = *Session::Create(root, s->session_options());
  {
    absl::Status st = session->Run({}, {}, {init->name()}, nullptr);
    ASSERT_TRUE(st.ok()) << st;
  }
  for (Node* op : {assign, add, sub}) ASSERT_TRUE(session->Run({}, {}, {op->name()}, nullptr).ok());
  auto out = testing::Fetch(*session, reads);
  ASSERT_TRUE(out.ok()) << out.status();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ((*out)[r].data<float>()[0], 5.5f) << r;
    EXPECT_EQ((*out)[r].data<float>()[1], 6.5f) << r;
  }
}

TEST(MirroredVariableTest, VariablesMadeWhileTracingAreMadeOnceWithPlainNames) {
  auto s = *MirroredStrategy::Create(CpuSpecs(2), Machine(2));
  Scope root = Scope::NewRootScope();
  train::Dense dense("dense", 3, train::Activation::kNone, /*seed=*/1);
  std::vector<Output> xs = {ops::Const<float>(root, {1, 2}, {1, 2}),
                            ops::Const<float>(root, {3, 4}, {1, 2})};
  auto result = s->Run(root, [&](ReplicaContext& ctx, const std::vector<Output>& in)
                                 -> absl::StatusOr<ReplicaResult> {
    STRATA_ASSIGN_OR_RETURN(Output y, dense.Apply(ctx.scope(), in[0]));
    return ReplicaResult{{y}, {}};
  }, {PerReplica(xs)});
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<std::string> names;
  for (train::Variable* v : train::GlobalVariables(root)) {
    names.push_back(v->name());
    EXPECT_NE(dynamic_cast<MirroredVariable*>(v), nullptr) << v->name();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"dense/kernel", "dense/bias"}));
}

TEST(MirroredVariableTest, VariableFromOutsideTheScopeIsRejectedInRun) {
  auto s = *MirroredStrategy::Create(CpuSpecs(2), Machine(2));
  Scope root = Scope::NewRootScope();
  train::Variable* plain = train::CreateVariable(root, "plain", TensorShape{2}, DT_FLOAT, train::Ones());
  ASSERT_NE(plain, nullptr);
  auto result = s->Run(root, [&](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    return ReplicaResult{{plain->Read(ctx.scope())}, {}};
  });
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(result.status().message(), "'plain'")) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "not made under this strategy's Scope()"))
      << result.status();
}

TEST(MirroredVariableTest, PlainOptimizerUpdatingThePrimaryFromEveryReplicaIsRejected) {
  auto s = *MirroredStrategy::Create(CpuSpecs(2), Machine(2));
  Scope root = Scope::NewRootScope();
  StrategyScope in_scope = s->Scope();
  train::Variable* w = train::CreateVariable(root, "w", TensorShape{2}, DT_FLOAT, train::Ones());
  train::SGD plain_sgd(0.1);  // not a DistributedOptimizer
  auto result = s->Run(root, [&](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    Output g = ops::Mul(ctx.scope(), w->Read(ctx.scope()), ops::Const(ctx.scope(), 2.0f));
    Node* train_op = plain_sgd.ApplyGradients(ctx.scope(), {{g, w}});
    STRATA_RETURN_IF_ERROR(ctx.scope().status());
    return ReplicaResult{{}, {train_op}};
  });
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(result.status().message(), "replica 1")) << result.status();
  EXPECT_TRUE(absl::StrContains(result.status().message(), "its own copy")) << result.status();
}

TEST(MirroredVariableTest, UseInsideAnotherStrategysRunFails) {
  auto a = *MirroredStrategy::Create(CpuSpecs(2), Machine(2));
  auto b = *OneDeviceStrategy::Create("/cpu:0", Machine(2));
  Scope root = Scope::NewRootScope();
  train::Variable* w = nullptr;
  {
    StrategyScope in_a = a->Scope();
    w = train::CreateVariable(root, "w", TensorShape{2}, DT_FLOAT, train::Ones());
  }
  auto result = b->Run(root, [&](ReplicaContext& ctx, const std::vector<Output>&)
                                 -> absl::StatusOr<ReplicaResult> {
    return ReplicaResult{{w->Read(ctx.scope())}, {}};
  });
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(result.status().message(), "other than the one that made it"))
      << result.status();
}

}  // namespace
}  // namespace distribute
}  // namespace strata
