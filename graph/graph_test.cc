#include "graph/graph.h"

#include "base/status.h"
#include "graph/op_registry.h"
#include "graph/scope.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

// Test-only ops, so graph tests need no op library.
absl::Status TestBinaryShape(InferenceContext& c) { return BroadcastBinaryOpShape(c); }

STRATA_REGISTER_OP("GraphTestSource")
    .Output("out: T")
    .Attr("T: {float, int32}")
    .Attr("shape: shape = <unknown>")
    .SetShapeFn([](InferenceContext& c) {
      PartialTensorShape s;
      STRATA_RETURN_IF_ERROR(c.GetAttr("shape", &s));
      c.set_output(0, s);
      return absl::OkStatus();
    });
STRATA_REGISTER_OP("GraphTestAdd")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, int32}")
    .SetIsCommutative()
    .SetShapeFn(TestBinaryShape);
STRATA_REGISTER_OP("GraphTestSum")
    .Input("values: N * T")
    .Output("sum: T")
    .Attr("N: int >= 1")
    .Attr("T: {float, int32}")
    .Attr("scale: float = 1.5")
    .Attr("axes: list(int) = [0, -1]")
    .SetShapeFn(UnchangedShape);

tensorflow::NodeDef Def(const std::string& name, const std::string& op) {
  tensorflow::NodeDef d;
  d.set_name(name);
  d.set_op(op);
  (*d.mutable_attr())["T"] = MakeAttr(DT_FLOAT);
  return d;
}

TEST(OpRegistryTest, ParsesSpecs) {
  auto op = OpRegistry::Global()->LookUp("GraphTestSum");
  ASSERT_TRUE(op.ok());
  ASSERT_EQ((*op)->inputs.size(), 1u);
  EXPECT_EQ((*op)->inputs[0].number_attr, "N");
  EXPECT_EQ((*op)->inputs[0].type_attr, "T");
  const AttrDef* n = (*op)->FindAttr("N");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(*n->minimum, 1);
  const AttrDef* axes = (*op)->FindAttr("axes");
  ASSERT_NE(axes, nullptr);
  EXPECT_EQ(axes->default_value->list().i_size(), 2);
  EXPECT_EQ((*op)->FindAttr("T")->allowed_types.size(), 2u);
  EXPECT_EQ(OpRegistry::Global()->LookUp("NoSuchOp").status().code(), absl::StatusCode::kNotFound);
}

TEST(OpRegistryTest, BadSpecsAreRejected) {
  EXPECT_FALSE(OpDefBuilder("Bad1").Attr("x: nosuchtype").Build().ok());
  EXPECT_FALSE(OpDefBuilder("Bad2").Input("a: U").Build().ok());  // no attr U
  EXPECT_FALSE(OpDefBuilder("Bad3").Attr("x: int = abc").Build().ok());
}

TEST(GraphTest, AddNodeValidatesAttrs) {
  Graph g;
  auto wrong_type = Def("a", "GraphTestAdd");
  (*wrong_type.mutable_attr())["T"] = MakeAttr(int64_t{3});
  auto s = g.AddNode(wrong_type).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("node 'a'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("attr 'T'"), std::string::npos) << s;

  auto disallowed = Def("b", "GraphTestAdd");
  (*disallowed.mutable_attr())["T"] = MakeAttr(DT_DOUBLE);
  EXPECT_NE(g.AddNode(disallowed).status().message().find("not an allowed type"), std::string::npos);

  auto missing = Def("c", "GraphTestAdd");
  missing.mutable_attr()->clear();
  EXPECT_NE(g.AddNode(missing).status().message().find("missing"), std::string::npos);

  auto unknown = Def("d", "GraphTestAdd");
  (*unknown.mutable_attr())["bogus"] = MakeAttr(true);
  EXPECT_NE(g.AddNode(unknown).status().message().find("unknown attr 'bogus'"), std::string::npos);

  auto below_min = Def("e", "GraphTestSum");
  (*below_min.mutable_attr())["N"] = MakeAttr(int64_t{0});
  EXPECT_NE(g.AddNode(below_min).status().message().find("minimum"), std::string::npos);

  EXPECT_EQ(g.AddNode(Def("f", "Nope")).status().code(), absl::StatusCode::kNotFound);

  auto sum = Def("g", "GraphTestSum");
  (*sum.mutable_attr())["N"] = MakeAttr(int64_t{3});
  auto n = g.AddNode(sum);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ((*n)->num_inputs(), 3);
  float scale;
  ASSERT_TRUE(GetAttr((*n)->attrs(), "scale", &scale).ok());  // default filled in
  EXPECT_EQ(scale, 1.5f);
  EXPECT_EQ(g.AddNode(sum).status().code(), absl::StatusCode::kAlreadyExists);
}

TEST(GraphTest, EdgesCheckIndicesAndTypes) {
  Graph g;
  Node* a = *g.AddNode(Def("a", "GraphTestSource"));
  auto int_def = Def("i", "GraphTestSource");
  (*int_def.mutable_attr())["T"] = MakeAttr(DT_INT32);
  Node* i = *g.AddNode(int_def);
  Node* add = *g.AddNode(Def("add", "GraphTestAdd"));
  EXPECT_TRUE(g.AddEdge(a, 0, add, 0).ok());
  EXPECT_FALSE(g.AddEdge(a, 0, add, 0).ok());  // input taken
  EXPECT_FALSE(g.AddEdge(a, 1, add, 1).ok());  // no output 1
  EXPECT_FALSE(g.AddEdge(a, 0, add, 2).ok());  // no input 2
  auto mismatch = g.AddEdge(i, 0, add, 1);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("expects float"), std::string::npos);
  EXPECT_FALSE(g.CheckInputsConnected().ok());
  ASSERT_TRUE(g.AddEdge(a, 0, add, 1).ok());
  EXPECT_TRUE(g.CheckInputsConnected().ok());
}

TEST(GraphTest, TopologicalSortFindsCycles) {
  Graph g;
  Node* a = *g.AddNode(Def("a", "GraphTestSource"));
  Node* x = *g.AddNode(Def("x", "GraphTestAdd"));
  Node* y = *g.AddNode(Def("y", "GraphTestAdd"));
  ASSERT_TRUE(g.AddEdge(a, 0, x, 0).ok());
  ASSERT_TRUE(g.AddEdge(a, 0, y, 0).ok());
  ASSERT_TRUE(g.AddEdge(x, 0, y, 1).ok());
  auto order = g.TopologicalSort();
  ASSERT_TRUE(order.ok());
  ASSERT_EQ(order->size(), 3u);
  EXPECT_EQ((*order)[0], a);
  EXPECT_EQ((*order)[2], y);
  ASSERT_TRUE(g.AddEdge(y, 0, x, 1).ok());  // x <-> y
  auto cyc = g.TopologicalSort();
  ASSERT_FALSE(cyc.ok());
  EXPECT_NE(cyc.status().message().find("cycle"), std::string::npos);
  EXPECT_NE(cyc.status().message().find("x"), std::string::npos);
}

TEST(GraphTest, RemoveNodeDropsEdgesAndExportWritesInputs) {
  Graph g;
  Node* a = *g.AddNode(Def("a", "GraphTestSource"));
  Node* b = *g.AddNode(Def("b", "GraphTestSource"));
  Node* add = *g.AddNode(Def("add", "GraphTestAdd"));
  ASSERT_TRUE(g.AddEdge(a, 0, add, 0).ok());
  ASSERT_TRUE(g.AddEdge(b, 0, add, 1).ok());
  g.AddControlEdge(b, a);
  tensorflow::GraphDef def;
  g.ToGraphDef(&def);
  ASSERT_EQ(def.node_size(), 3);
  EXPECT_EQ(def.node(0).input(0), "^b");
  EXPECT_EQ(def.node(2).input(0), "a");
  EXPECT_EQ(def.node(2).input(1), "b");
  g.RemoveNode(b);
  EXPECT_EQ(g.num_nodes(), 2);
  EXPECT_EQ(g.FindNode("b"), nullptr);
  EXPECT_TRUE(a->in_edges().empty());
  EXPECT_EQ(add->in_edges().size(), 1u);
}

TEST(ScopeTest, BuilderNamesInfersAttrsAndShapes) {
  Scope root = Scope::NewRootScope();
  Node* a = NodeBuilder(root.WithOpName("a"), "GraphTestSource")
                .Attr("T", DT_FLOAT)
                .Attr("shape", PartialTensorShape({-1, 3}))
                .Finalize();
  Node* b = NodeBuilder(root.WithOpName("b"), "GraphTestSource")
                .Attr("T", DT_FLOAT)
                .Attr("shape", PartialTensorShape({1}))
                .Finalize();
  Scope layer = root.NewSubScope("layer").WithDevice("/cpu:0");
  Node* add = NodeBuilder(layer, "GraphTestAdd").Input(Output(a, 0)).Input(Output(b, 0)).Finalize();
  Node* add2 = NodeBuilder(layer, "GraphTestAdd").Input(Output(a, 0)).Input(Output(add, 0)).Finalize();
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(add->name(), "layer/GraphTestAdd");
  EXPECT_EQ(add2->name(), "layer/GraphTestAdd_1");
  EXPECT_EQ(add->requested_device(), "/cpu:0");
  EXPECT_EQ(add->output_shape(0).DebugString(), "[?,3]");
  EXPECT_EQ(root.NewSubScope("layer").GetUniqueNameForOp("x"), "layer_1/x");

  Node* sum = NodeBuilder(root, "GraphTestSum").Input(OutputList{Output(a, 0), Output(add, 0)}).Finalize();
  ASSERT_NE(sum, nullptr);
  int64_t n;
  ASSERT_TRUE(GetAttr(sum->attrs(), "N", &n).ok());
  EXPECT_EQ(n, 2);
}

TEST(ScopeTest, FirstErrorIsKeptAndNamesTheNode) {
  Scope root = Scope::NewRootScope();
  Node* a = NodeBuilder(root, "GraphTestSource").Attr("T", DT_FLOAT)
                .Attr("shape", PartialTensorShape({2, 3})).Finalize();
  Node* b = NodeBuilder(root, "GraphTestSource").Attr("T", DT_FLOAT)
                .Attr("shape", PartialTensorShape({4, 3})).Finalize();
  Node* bad = NodeBuilder(root.WithOpName("bad_add"), "GraphTestAdd")
                  .Input(Output(a, 0)).Input(Output(b, 0)).Finalize();
  EXPECT_EQ(bad, nullptr);
  ASSERT_FALSE(root.ok());
  EXPECT_NE(root.status().message().find("bad_add"), std::string::npos) << root.status();
  EXPECT_NE(root.status().message().find("broadcastable"), std::string::npos) << root.status();
  EXPECT_EQ(root.graph()->FindNode("bad_add"), nullptr);  // not left half-built
  // Later ops are no-ops; the first error stays.
  EXPECT_EQ(NodeBuilder(root, "GraphTestAdd").Input(Output(a, 0)).Input(Output(a, 0)).Finalize(), nullptr);
  EXPECT_NE(root.status().message().find("bad_add"), std::string::npos);
}

}  // namespace
}  // namespace strata
