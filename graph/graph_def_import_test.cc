#include "graph/graph_def_import.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/unknown_field_set.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

::tensorflow::GraphDef Parse(const std::string& text) {
  ::tensorflow::GraphDef def;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &def)) << text;
  return def;
}

std::string Deterministic(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  m.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

// proto3 classes have no unknown_fields() accessor; reflection has.
google::protobuf::UnknownFieldSet* Unknown(google::protobuf::Message* m) {
  return m->GetReflection()->MutableUnknownFields(m);
}

std::string Export(const Graph& g) {
  ::tensorflow::GraphDef out;
  g.ToGraphDef(&out);
  return Deterministic(out);
}

// x (placeholder) and two consumers listed before their producers.
constexpr char kOutOfOrder[] = R"pb(
  node { name: "y" op: "AddV2" input: "x" input: "two" input: "^c"
         attr { key: "T" value { type: DT_FLOAT } } }
  node { name: "two" op: "Const"
         attr { key: "dtype" value { type: DT_FLOAT } }
         attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 2 } } } }
  node { name: "c" op: "NoOp" }
  node { name: "x" op: "Placeholder"
         attr { key: "dtype" value { type: DT_FLOAT } }
         attr { key: "shape" value { shape { dim { size: -1 } dim { size: 3 } } } } }
  versions { producer: 1234 }
)pb";

TEST(ParseInputNameTest, Forms) {
  auto a = ParseInputName("a/b");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->node, "a/b");
  EXPECT_EQ(a->index, 0);
  auto b = ParseInputName("a:12");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->node, "a");
  EXPECT_EQ(b->index, 12);
  auto c = ParseInputName("^ctl");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->node, "ctl");
  EXPECT_TRUE(c->IsControl());
  for (const char* bad : {"", "^", ":1", "a:", "a:-1", "a:+1", "a:x", "a:99999999999", "^a:1"}) {
    EXPECT_FALSE(ParseInputName(bad).ok()) << bad;
  }
}

TEST(ImportGraphDefTest, NodesInAnyOrderEdgesAndShapes) {
  auto g = ImportGraphDef(Parse(kOutOfOrder));
  ASSERT_TRUE(g.ok()) << g.status();
  Node* y = (*g)->FindNode("y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->input_edge(0)->src->name(), "x");
  EXPECT_EQ(y->input_edge(1)->src->name(), "two");
  int control = 0;
  for (const Edge* e : y->in_edges()) control += e->IsControlEdge() && e->src->name() == "c";
  EXPECT_EQ(control, 1);
  EXPECT_EQ(y->output_shape(0), PartialTensorShape({-1, 3}));
  EXPECT_EQ((*g)->versions().producer(), 1234);
}

TEST(ImportGraphDefTest, RoundTripIsExact) {
  const ::tensorflow::GraphDef def = Parse(kOutOfOrder);
  auto g = ImportGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Export(**g), Deterministic(def));
}

TEST(ImportGraphDefTest, BuilderGraphRoundTripsExactly) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 4}));
  Output w = ops::Const<float>(root.WithOpName("w"), {1, 2, 3, 4, 5, 6, 7, 8}, TensorShape{4, 2});
  Output y = ops::MatMul(root.WithDevice("/cpu:0"), x, w, ops::MatMul::Attrs().TransposeA(false));
  Output z = ops::Relu(root.WithControlDependencies({x.node()}), y);
  Output s = ops::AddN(root, {z, z, y});
  ASSERT_TRUE(root.ok()) << root.status();
  ::tensorflow::GraphDef def;
  ASSERT_TRUE(root.ToGraphDef(&def).ok());
  auto g = ImportGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Export(**g), Deterministic(def));
  EXPECT_EQ((*g)->FindNode(s.node()->name())->output_shape(0), PartialTensorShape({-1, 2}));
  EXPECT_EQ((*g)->FindNode(y.node()->name())->requested_device(), "/cpu:0");
}

TEST(ImportGraphDefTest, UnknownFieldsSurvive) {
  ::tensorflow::GraphDef def = Parse(kOutOfOrder);
  // TensorFlow's GraphDef.library (2) and debug_info (5), and NodeDef's
  // experimental_debug_info (6), which Strata's protos do not declare.
  Unknown(&def)->AddLengthDelimited(2, "library bytes");
  Unknown(&def)->AddLengthDelimited(5, "debug info bytes");
  Unknown(def.mutable_node(0))->AddLengthDelimited(6, "node debug info");
  def.set_version(7);  // deprecated, still a field
  // The same bytes through a parse, as they would come from a file.
  ::tensorflow::GraphDef reparsed;
  ASSERT_TRUE(reparsed.ParseFromString(Deterministic(def)));
  auto g = ImportGraphDef(reparsed);
  ASSERT_TRUE(g.ok()) << g.status();
  ::tensorflow::GraphDef out;
  (*g)->ToGraphDef(&out);
  EXPECT_EQ(Unknown(&out)->field_count(), 2);
  EXPECT_EQ(Unknown(out.mutable_node(0))->field_count(), 1);
  EXPECT_EQ(Deterministic(out), Deterministic(reparsed));
}

TEST(ImportGraphDefTest, NoVersionsStaysWithoutVersions) {
  ::tensorflow::GraphDef def = Parse(kOutOfOrder);
  def.clear_versions();
  auto g = ImportGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status();
  ::tensorflow::GraphDef out;
  (*g)->ToGraphDef(&out);
  EXPECT_FALSE(out.has_versions());
  EXPECT_EQ(Deterministic(out), Deterministic(def));
}

TEST(ImportGraphDefTest, DefaultedAttrsAreWrittenOnExport) {
  // MatMul without transpose_a/transpose_b/grad_a/grad_b, Placeholder
  // without shape: import fills the defaults, export writes them.
  const ::tensorflow::GraphDef def = Parse(R"pb(
    node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
    node { name: "m" op: "MatMul" input: "x" input: "x"
           attr { key: "T" value { type: DT_FLOAT } } }
  )pb");
  auto g = ImportGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status();
  ::tensorflow::GraphDef out;
  (*g)->ToGraphDef(&out);
  EXPECT_TRUE(out.node(1).attr().contains("transpose_a"));
  EXPECT_TRUE(out.node(0).attr().at("shape").shape().unknown_rank());
  ::tensorflow::GraphDef completed = def;
  CompleteDefaultAttrs(&completed);
  EXPECT_EQ(Deterministic(out), Deterministic(completed));
}

TEST(ImportGraphDefTest, InternalOpsAndNamesOfStepGraphs) {
  // What a session's step graph looks like: _Arg / _Retval nodes with
  // internal names; a worker imports such graphs.
  const ::tensorflow::GraphDef def = Parse(R"pb(
    node { name: "_arg_x_0" op: "_Arg" attr { key: "T" value { type: DT_FLOAT } }
           attr { key: "index" value { i: 0 } } }
    node { name: "y" op: "Neg" input: "_arg_x_0" attr { key: "T" value { type: DT_FLOAT } } }
    node { name: "_retval_y_0" op: "_Retval" input: "y" attr { key: "T" value { type: DT_FLOAT } }
           attr { key: "index" value { i: 0 } } }
  )pb");
  auto g = ImportGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(Export(**g), Deterministic(def));
}

TEST(ImportGraphDefTest, SameTensorTwiceIsFine) {
  auto g = ImportGraphDef(Parse(R"pb(
    node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
    node { name: "sq" op: "Mul" input: "x" input: "x" input: "^x"
           attr { key: "T" value { type: DT_FLOAT } } }
  )pb"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->FindNode("sq")->in_edges().size(), 3u);
}

TEST(ImportGraphDefTest, ErrorsNameTheNode) {
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {R"pb(node { name: "n" op: "NoSuchOp" })pb", "NoSuchOp"},
      {R"pb(node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
            node { name: "n" op: "Identity" input: "x:3" attr { key: "T" value { type: DT_FLOAT } } })pb",
       "which has 1 outputs"},
      {R"pb(node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } }
            node { name: "n" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } })pb",
       "dtype mismatch"},
      {R"pb(node { name: "n" op: "Identity" input: "n" attr { key: "T" value { type: DT_FLOAT } } })pb",
       "cycle"},
      {R"pb(node { name: "n" op: "Neg" attr { key: "T" value { type: DT_FLOAT } } })pb",
       "has 0 data inputs; the op takes 1"},
      {R"pb(node { name: "n" op: "Const"
                   attr { key: "dtype" value { type: DT_INT32 } }
                   attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} } } } })pb",
       "attr 'dtype' is int32"},
  };
  for (const Case& c : cases) {
    auto g = ImportGraphDef(Parse(c.text));
    ASSERT_FALSE(g.ok()) << c.text;
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(c.expect));
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("'n'"));
  }
}

// Every unknown op at once, with the nodes using it, before anything else
// is checked: a model being ported shows its whole gap in one try.
TEST(ImportGraphDefTest, EveryUnknownOpIsNamedAtOnce) {
  auto g = ImportGraphDef(Parse(R"pb(
    node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
    node { name: "e1" op: "CudnnRNN" input: "x" }
    node { name: "s" op: "StringSplit" input: "x" }
    node { name: "e2" op: "CudnnRNN" input: "s" }
    node { name: "e3" op: "CudnnRNN" input: "x" }
    node { name: "e4" op: "CudnnRNN" input: "x" }
    node { name: "bad" op: "Neg" input: "x:7" })pb"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kNotFound);
  const std::string msg(g.status().message());
  EXPECT_THAT(msg, HasSubstr("2 ops of the graph are not registered in Strata"));
  EXPECT_THAT(msg, HasSubstr("op 'CudnnRNN' (4 nodes: 'e1', 'e2', 'e3', ...)"));
  EXPECT_THAT(msg, HasSubstr("op 'StringSplit' (node 's')"));
}

TEST(ImportGraphDefTest, CycleErrorSpellsOutTheCycle) {
  // a -> b -> c -> a, with d hanging off the cycle (not part of it).
  auto g = ImportGraphDef(Parse(R"pb(
    node { name: "a" op: "Identity" input: "c" attr { key: "T" value { type: DT_FLOAT } } }
    node { name: "b" op: "Identity" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    node { name: "d" op: "Identity" input: "b" attr { key: "T" value { type: DT_FLOAT } } }
    node { name: "c" op: "Neg" input: "b" attr { key: "T" value { type: DT_FLOAT } } }
  )pb"));
  ASSERT_FALSE(g.ok());
  const std::string msg(g.status().message());
  EXPECT_THAT(msg, HasSubstr("cycle"));
  EXPECT_THAT(msg, HasSubstr("'a' -> 'b'"));
  EXPECT_THAT(msg, HasSubstr("'b' -> 'c'"));
  EXPECT_THAT(msg, HasSubstr("'c' -> 'a'"));
  EXPECT_THAT(msg, ::testing::Not(HasSubstr("'d'")));
}

TEST(ImportGraphDefTest, ShapeErrorNamesTheNode) {
  auto g = ImportGraphDef(Parse(R"pb(
    node { name: "a" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
           attr { key: "shape" value { shape { dim { size: 2 } dim { size: 3 } } } } }
    node { name: "prod" op: "MatMul" input: "a" input: "a"
           attr { key: "T" value { type: DT_FLOAT } } }
  )pb"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(g.status().message()), HasSubstr("'prod'"));
}

TEST(ImportGraphDefTest, FailureLeavesGraphEmptyAndNonEmptyIsRefused) {
  Graph g;
  ::tensorflow::GraphDef bad = Parse(kOutOfOrder);
  bad.mutable_node(0)->set_input(0, "missing");
  EXPECT_FALSE(ImportGraphDef(bad, &g).ok());
  EXPECT_EQ(g.num_nodes(), 0);
  ASSERT_TRUE(ImportGraphDef(Parse(kOutOfOrder), &g).ok());
  EXPECT_EQ(g.num_nodes(), 4);
  absl::Status again = ImportGraphDef(Parse(kOutOfOrder), &g);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ValidateTensorProtoTest, RejectsMalformedTensors) {
  ::tensorflow::TensorProto ok;
  ok.set_dtype(DT_FLOAT);
  ok.mutable_tensor_shape()->add_dim()->set_size(3);
  ok.add_float_val(1);  // repeated to fill: TensorFlow's rule
  EXPECT_TRUE(ValidateTensorProto(ok).ok());

  ::tensorflow::TensorProto too_many = ok;
  for (int i = 0; i < 3; ++i) too_many.add_float_val(2);
  EXPECT_THAT(std::string(ValidateTensorProto(too_many).message()), HasSubstr("4 values"));

  ::tensorflow::TensorProto content = ok;
  content.clear_float_val();
  content.set_tensor_content(std::string(11, '\0'));
  EXPECT_THAT(std::string(ValidateTensorProto(content).message()), HasSubstr("11 bytes"));

  ::tensorflow::TensorProto huge = ok;
  huge.mutable_tensor_shape()->mutable_dim(0)->set_size(int64_t{1} << 40);
  EXPECT_THAT(std::string(ValidateTensorProto(huge).message()), HasSubstr("2 GiB"));

  ::tensorflow::TensorProto negative = ok;
  negative.mutable_tensor_shape()->mutable_dim(0)->set_size(-2);
  EXPECT_FALSE(ValidateTensorProto(negative).ok());

  ::tensorflow::TensorProto str = ok;
  str.set_dtype(::tensorflow::DT_STRING);
  EXPECT_THAT(std::string(ValidateTensorProto(str).message()), HasSubstr("unsupported dtype"));
}

}  // namespace
}  // namespace strata
