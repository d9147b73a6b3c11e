#include "graph/passes/prune.h"

#include "gmock/gmock.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

std::vector<std::string> Names(const Graph& g) {
  std::vector<std::string> out;
  for (Node* n : g.nodes()) out.push_back(n->name());
  return out;
}

// x -> exp -> neg -> out; x -> sq (unused); c (unused); noop after neg.
struct Fixture {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({2}));
  Output exp = ops::Exp(root.WithOpName("exp"), x);
  Output neg = ops::Neg(root.WithOpName("neg"), exp);
  Output out = ops::Identity(root.WithOpName("out"), neg);
  Output sq = ops::Square(root.WithOpName("sq"), x);
  Output c = ops::Const(root.WithOpName("c"), 3.0f);
  Node* done = ops::NoOp(root.WithOpName("done").WithControlDependencies({neg.node()}));
  Graph* g() { return root.graph(); }
};

TEST(PruneTest, KeepsOnlyWhatFetchesNeed) {
  Fixture f;
  ASSERT_TRUE(f.root.ok()) << f.root.status();
  auto changed = PruneGraph(f.g(), {"out"}, {});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_THAT(Names(*f.g()), UnorderedElementsAre("x", "exp", "neg", "out"));
  EXPECT_TRUE(f.g()->CheckInputsConnected().ok());
  // Nothing more to remove.
  auto again = PruneGraph(f.g(), {"out"}, {});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

TEST(PruneTest, TargetsKeepTheirControlInputs) {
  Fixture f;
  auto changed = PruneGraph(f.g(), {}, {"done"});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_THAT(Names(*f.g()), UnorderedElementsAre("x", "exp", "neg", "done"));
}

TEST(PruneTest, AFedTensorCutsTheWalk) {
  Fixture f;
  auto changed = PruneGraph(f.g(), {"out"}, {}, {"exp"});
  ASSERT_TRUE(changed.ok()) << changed.status();
  // exp is fed: it becomes a Placeholder of its dtype and shape; x is not needed.
  EXPECT_THAT(Names(*f.g()), UnorderedElementsAre("exp", "neg", "out"));
  Node* exp = f.g()->FindNode("exp");
  ASSERT_NE(exp, nullptr);
  EXPECT_TRUE(exp->IsOp("Placeholder"));
  EXPECT_EQ(exp->output_type(0), DT_FLOAT);
  EXPECT_EQ(exp->output_shape(0), PartialTensorShape({2}));
  EXPECT_EQ(f.g()->FindNode("neg")->input_edge(0)->src, exp);
  EXPECT_TRUE(f.g()->CheckInputsConnected().ok());
}

TEST(PruneTest, AFedNodeStillNeededElsewhereIsKept) {
  Fixture f;
  // x feeds exp and sq; fetching sq too keeps x, and exp (fed) is still cut.
  auto changed = PruneGraph(f.g(), {"out", "sq"}, {}, {"exp", "x"});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_THAT(Names(*f.g()), UnorderedElementsAre("x", "exp", "neg", "out", "sq"));
  EXPECT_TRUE(f.g()->FindNode("exp")->IsOp("Placeholder"));
  EXPECT_TRUE(f.g()->FindNode("x")->IsOp("Placeholder"));
}

TEST(PruneTest, AFedTargetRunsWithItsInputs) {
  Fixture f;
  auto changed = PruneGraph(f.g(), {}, {"exp"}, {"exp"});
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_THAT(Names(*f.g()), UnorderedElementsAre("x", "exp"));
  EXPECT_TRUE(f.g()->FindNode("exp")->IsOp("Exp"));
}

TEST(PruneTest, BadNamesChangeNothing) {
  Fixture f;
  const int before = f.g()->num_nodes();
  auto a = PruneGraph(f.g(), {"nope"}, {});
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("fetch 'nope'"));
  auto b = PruneGraph(f.g(), {"out:1"}, {});
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("has 1 outputs"));
  auto c = PruneGraph(f.g(), {"out"}, {"ghost"});
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("target 'ghost'"));
  auto d = PruneGraph(f.g(), {"out"}, {}, {"x:7"});
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("feed 'x:7'"));
  EXPECT_EQ(f.g()->num_nodes(), before);
}

}  // namespace
}  // namespace strata
