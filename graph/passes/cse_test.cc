#include "graph/passes/cse.h"

#include "gmock/gmock.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/random_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

int CountOp(const Graph& g, const char* op) {
  int n = 0;
  for (Node* node : g.nodes()) n += node->IsOp(op);
  return n;
}

bool Cse(Graph* g, const std::vector<std::string>& keep = {}) {
  auto changed = EliminateCommonSubexpressions(g, keep);
  EXPECT_TRUE(changed.ok()) << changed.status();
  return changed.ok() && *changed;
}

TEST(CseTest, MergesDuplicatedChainsAndRewiresConsumers) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output a1 = ops::Exp(root, ops::Neg(root, x));
  Output a2 = ops::Exp(root, ops::Neg(root, x));
  ops::AddV2(root.WithOpName("sum"), a1, a2);
  ASSERT_TRUE(root.ok()) << root.status();
  Graph* g = root.graph();
  EXPECT_TRUE(Cse(g));
  EXPECT_EQ(CountOp(*g, "Neg"), 1);
  EXPECT_EQ(CountOp(*g, "Exp"), 1);
  Node* s = g->FindNode("sum");
  EXPECT_EQ(s->input_edge(0)->src, s->input_edge(1)->src);
  EXPECT_TRUE(g->CheckInputsConnected().ok());
  EXPECT_FALSE(Cse(g));  // a fixed point
}

TEST(CseTest, CommutativeOpsMatchSwappedInputsOthersDoNot) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT);
  Output m1 = ops::Mul(root, x, y), m2 = ops::Mul(root, y, x);
  Output s1 = ops::Sub(root, x, y), s2 = ops::Sub(root, y, x);
  ops::AddN(root, {m1, m2, s1, s2});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_TRUE(Cse(root.graph()));
  EXPECT_EQ(CountOp(*root.graph(), "Mul"), 1);
  EXPECT_EQ(CountOp(*root.graph(), "Sub"), 2);
  EXPECT_EQ(CountOp(*root.graph(), "Placeholder"), 2);
}

TEST(CseTest, AttrsDeviceAndControlInputsMustMatch) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({2, 2}));
  Output a = ops::MatMul(root, x, x);
  Output b = ops::MatMul(root, x, x, ops::MatMul::Attrs().TransposeB(true));
  Output c = ops::MatMul(root.WithDevice("/cpu:1"), x, x);
  Node* gate = ops::NoOp(root.WithOpName("gate"));
  Output d = ops::MatMul(root.WithControlDependencies({gate}), x, x);
  ops::AddN(root, {a, b, c, d});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_FALSE(Cse(root.graph()));
  EXPECT_EQ(CountOp(*root.graph(), "MatMul"), 4);
}

TEST(CseTest, ConstantsWithEqualValuesMerge) {
  Scope root = Scope::NewRootScope();
  Output c1 = ops::Const<float>(root, {1, 2});
  Output c2 = ops::Const<float>(root, {1, 2});
  Output c3 = ops::Const<float>(root, {1, 3});
  ops::AddN(root, {c1, c2, c3});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_TRUE(Cse(root.graph()));
  EXPECT_EQ(CountOp(*root.graph(), "Const"), 2);
}

TEST(CseTest, StatefulOpsAndPlaceholdersAreNeverMerged) {
  Scope root = Scope::NewRootScope();
  Output shape = ops::Const<int32_t>(root, {2});
  Output r1 = ops::RandomUniform(root, shape, DT_FLOAT);
  Output r2 = ops::RandomUniform(root, shape, DT_FLOAT);
  Output p1 = ops::Placeholder(root, DT_FLOAT, PartialTensorShape({2}));
  Output p2 = ops::Placeholder(root, DT_FLOAT, PartialTensorShape({2}));
  ops::AddN(root, {r1, r2, p1, p2});
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_TRUE(root.graph()->FindNode(r1.node()->name())->op_def().is_stateful);
  EXPECT_FALSE(Cse(root.graph()));
  EXPECT_EQ(CountOp(*root.graph(), "RandomUniform"), 2);
  EXPECT_EQ(CountOp(*root.graph(), "Placeholder"), 2);
}

TEST(CseTest, KeptNodesSurvive) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  ops::Neg(root.WithOpName("a"), x);
  ops::Neg(root.WithOpName("b"), x);
  ops::Neg(root.WithOpName("c"), x);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_TRUE(Cse(root.graph(), {"b"}));
  EXPECT_NE(root.graph()->FindNode("a"), nullptr);
  EXPECT_NE(root.graph()->FindNode("b"), nullptr);
  EXPECT_EQ(root.graph()->FindNode("c"), nullptr);
}

}  // namespace
}  // namespace strata
