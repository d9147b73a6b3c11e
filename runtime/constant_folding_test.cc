#include "runtime/constant_folding.h"

#include <vector>

#include "gmock/gmock.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"
#include "graph/ops/random_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "runtime/session.h"

namespace strata {
namespace {

bool Fold(Graph* g, ConstantFoldingOptions opts = {}) {
  auto changed = FoldConstants(g, opts);
  EXPECT_TRUE(changed.ok()) << changed.status();
  return changed.ok() && *changed;
}

std::vector<float> ConstValue(const Graph& g, const std::string& name) {
  Node* n = g.FindNode(name);
  EXPECT_NE(n, nullptr) << name;
  if (n == nullptr || !n->IsOp("Const")) return {};
  Tensor t;
  EXPECT_TRUE(GetAttr(n->attrs(), "value", &t).ok());
  return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements());
}

TEST(ConstantFoldingTest, FoldsAConstantChainKeepingNamesAndConsumers) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({2}));
  Output a = ops::Const<float>(root.WithOpName("a"), {1, 2});
  Output b = ops::Const<float>(root.WithOpName("b"), {3, 4});
  Output prod = ops::Mul(root.WithOpName("prod").WithDevice("/cpu:0"), a, b);
  Output neg = ops::Neg(root.WithOpName("neg"), prod);
  Output sum = ops::AddN(root.WithOpName("sum"), {neg, a, b});
  ops::AddV2(root.WithOpName("y"), x, sum);
  ASSERT_TRUE(root.ok()) << root.status();
  Graph* g = root.graph();
  EXPECT_TRUE(Fold(g));
  EXPECT_THAT(ConstValue(*g, "prod"), ::testing::ElementsAre(3, 8));
  EXPECT_THAT(ConstValue(*g, "neg"), ::testing::ElementsAre(-3, -8));
  EXPECT_THAT(ConstValue(*g, "sum"), ::testing::ElementsAre(1, -2));  // list input
  EXPECT_EQ(g->FindNode("prod")->requested_device(), "/cpu:0");
  EXPECT_EQ(g->FindNode("sum")->output_shape(0), PartialTensorShape({2}));
  Node* yn = g->FindNode("y");
  EXPECT_TRUE(yn->IsOp("AddV2"));  // depends on a placeholder
  EXPECT_EQ(yn->input_edge(1)->src, g->FindNode("sum"));
  EXPECT_TRUE(g->CheckInputsConnected().ok());
  EXPECT_FALSE(Fold(g));  // a fixed point
}

TEST(ConstantFoldingTest, LeavesStatefulMultiOutputAndPlaceholderFedNodes) {
  Scope root = Scope::NewRootScope();
  Output shape = ops::Const<int32_t>(root, {2});
  ops::RandomUniform(root.WithOpName("random"), shape, DT_FLOAT);
  Output logits = ops::Const<float>(root, {1, 2, 3, 4}, TensorShape{2, 2});
  Output labels = ops::Const<int32_t>(root, {0, 1});
  ops::SparseSoftmaxCrossEntropyWithLogits(root.WithOpName("xent"), logits, labels);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_FALSE(Fold(root.graph()));
  EXPECT_TRUE(root.graph()->FindNode("random")->IsOp("RandomUniform"));
  EXPECT_TRUE(root.graph()->FindNode("xent")->IsOp("SparseSoftmaxCrossEntropyWithLogits"));
}

TEST(ConstantFoldingTest, CapsTheSizeOfFoldedConstants) {
  Scope root = Scope::NewRootScope();
  // 4 bytes of graph that would expand to 16M floats (64 MB).
  Output dims = ops::Const<int32_t>(root, {4000, 4000});
  ops::Fill(root.WithOpName("big"), dims, ops::Const(root, 1.0f));
  ops::Neg(root.WithOpName("small"), ops::Const<float>(root, {1, 2, 3}));
  ASSERT_TRUE(root.ok()) << root.status();
  ConstantFoldingOptions opts;
  opts.max_constant_elements = 2;
  EXPECT_FALSE(Fold(root.graph(), opts));
  EXPECT_TRUE(root.graph()->FindNode("small")->IsOp("Neg"));
  EXPECT_TRUE(Fold(root.graph()));  // default cap: 10M elements
  EXPECT_TRUE(root.graph()->FindNode("big")->IsOp("Fill"));
  EXPECT_TRUE(root.graph()->FindNode("small")->IsOp("Const"));
}

TEST(ConstantFoldingTest, KeepsControlDependencies) {
  Scope root = Scope::NewRootScope();
  Node* gate = ops::NoOp(root.WithOpName("gate"));
  Node* later = ops::NoOp(root.WithOpName("later"));
  Output c = ops::Const<float>(root.WithOpName("c").WithControlDependencies({gate}), {2});
  Output n = ops::Neg(root.WithOpName("n").WithControlDependencies({later}), c);
  Node* after = ops::NoOp(root.WithOpName("after").WithControlDependencies({n.node()}));
  ASSERT_TRUE(root.ok()) << root.status();
  Graph* g = root.graph();
  EXPECT_TRUE(Fold(g));
  Node* folded = g->FindNode("n");
  ASSERT_TRUE(folded->IsOp("Const"));
  std::vector<std::string> control_srcs;
  for (const Edge* e : folded->in_edges()) {
    if (e->IsControlEdge()) control_srcs.push_back(e->src->name());
  }
  EXPECT_THAT(control_srcs, ::testing::UnorderedElementsAre("gate", "later"));
  bool ordered_before_after = false;
  for (const Edge* e : folded->out_edges()) ordered_before_after |= e->dst == after;
  EXPECT_TRUE(ordered_before_after);
}

TEST(ConstantFoldingTest, AKernelErrorLeavesTheNodeForTheStep) {
  // Slice(in[3], begin=2, size=2) reads past the end. Built without shape
  // inference (which would refuse it) and given a plausible output shape, as
  // a lenient shape function would: only the kernel finds the error.
  Scope root = Scope::NewRootScope();
  Output in = ops::Const<float>(root, {1, 2, 3});
  Output begin = ops::Const<int32_t>(root, {2});
  Output size = ops::Const<int32_t>(root, {2});
  ASSERT_TRUE(root.ok()) << root.status();
  Graph* g = root.graph();
  ::tensorflow::NodeDef def;
  def.set_name("s");
  def.set_op("Slice");
  (*def.mutable_attr())["T"] = MakeAttr(DT_FLOAT);
  (*def.mutable_attr())["Index"] = MakeAttr(DT_INT32);
  auto s = g->AddNode(def);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(g->AddEdge(in.node(), 0, *s, 0).ok());
  ASSERT_TRUE(g->AddEdge(begin.node(), 0, *s, 1).ok());
  ASSERT_TRUE(g->AddEdge(size.node(), 0, *s, 2).ok());
  (*s)->set_output_shapes({PartialTensorShape({2})});
  EXPECT_FALSE(Fold(g));
  EXPECT_TRUE(g->FindNode("s")->IsOp("Slice"));
}

TEST(ConstantFoldingTest, RunsAsASessionOptimizationPass) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({2}));
  Output s = ops::AddV2(root.WithOpName("s"), ops::Const<float>(root, {1, 2}),
                        ops::Const<float>(root, {10, 20}));
  ops::Mul(root.WithOpName("y"), x, s);
  ASSERT_TRUE(root.ok()) << root.status();
  SessionOptions opts;
  opts.optimization_passes.push_back([](Graph* g) { return FoldConstants(g).status(); });
  auto session = Session::Create(root, opts);
  ASSERT_TRUE(session.ok()) << session.status();
  RunOptions run_opts;
  run_opts.output_partition_graphs = true;
  RunMetadata meta;
  std::vector<Tensor> out;
  absl::Status st = (*session)->Run(run_opts, {{"x", Tensor::FromVector<float>({2, 3})}}, {"y"},
                                    {}, &out, &meta);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(std::vector<float>(out[0].data<float>(), out[0].data<float>() + 2),
              ::testing::ElementsAre(22, 66));
  ASSERT_FALSE(meta.partition_graphs.empty());
  for (const auto& gd : meta.partition_graphs) {
    for (const auto& n : gd.node()) EXPECT_NE(n.op(), "AddV2") << "s was not folded";
  }
}

}  // namespace
}  // namespace strata
