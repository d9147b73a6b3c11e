// GraphDefs written by real TensorFlow (tools/tf_interop/make_testdata.py)
// must import into Strata, infer shapes that agree with the tensors
// TensorFlow computed, and export back to the very same bytes.
//
// Test data per case, in tests/testdata/tf_interop/:
//   <case>.pb           binary GraphDef, deterministic serialization
//   <case>.expected.pb  GraphDef used as a box of tensors: nodes of op
//                       "feed" / "fetch" named by tensor, the tensor in attr
//                       "value"; "target" nodes name targets. Absent for
//                       import-only cases (random ops).
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "graph/graph_def_import.h"
#include "graph/tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

constexpr char kDir[] = "tests/testdata/tf_interop";

std::string ReadFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
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

std::vector<std::string> Cases() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kDir)) {
    const std::string f = e.path().filename().string();
    if (absl::EndsWith(f, ".pb") && !absl::EndsWith(f, ".expected.pb")) {
      out.push_back(f.substr(0, f.size() - 3));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

::tensorflow::GraphDef Load(const std::string& file) {
  ::tensorflow::GraphDef def;
  EXPECT_TRUE(def.ParseFromString(ReadFile(fs::path(kDir) / file))) << file;
  return def;
}

TEST(TfInteropTest, DataIsThere) {
  const std::vector<std::string> cases = Cases();
  EXPECT_THAT(cases, ::testing::IsSupersetOf({"mlp", "math_ops", "array_ops", "nn_ops",
                                              "control_deps", "random_ops"}));
}

TEST(TfInteropTest, EveryStrataOpIsCovered) {
  std::set<std::string> used;
  for (const std::string& c : Cases()) {
    const ::tensorflow::GraphDef def = Load(c + ".pb");
    for (const auto& n : def.node()) used.insert(n.op());
  }
  for (const char* op :
       {"Const", "Placeholder", "Identity", "NoOp", "Add", "AddV2", "Sub", "Mul", "RealDiv",
        "Neg", "Square", "Sqrt", "Rsqrt", "Exp", "Log", "Pow", "Maximum", "Minimum", "AddN",
        "MatMul", "BiasAdd", "Relu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Sum", "Mean",
        "Max", "Min", "Reshape", "Transpose", "ConcatV2", "Slice", "Pack", "Cast", "Fill",
        "ZerosLike", "OnesLike", "Shape", "ArgMax", "Equal", "Select", "SelectV2", "OneHot",
        "Conv2D", "MaxPool", "SparseSoftmaxCrossEntropyWithLogits", "RandomUniform"}) {
    EXPECT_TRUE(used.count(op)) << op << " is in no TensorFlow test graph";
  }
}

TEST(TfInteropTest, ImportsAndRoundTripsByteForByte) {
  for (const std::string& c : Cases()) {
    SCOPED_TRACE(c);
    const std::string bytes = ReadFile(fs::path(kDir) / (c + ".pb"));
    ::tensorflow::GraphDef def;
    ASSERT_TRUE(def.ParseFromString(bytes));
    auto g = ImportGraphDef(def);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ((*g)->num_nodes(), def.node_size());
    ::tensorflow::GraphDef out;
    (*g)->ToGraphDef(&out);
    // TensorFlow wrote the file with deterministic serialization too.
    EXPECT_TRUE(Deterministic(def) == bytes) << "reserialization differs from TensorFlow's bytes";
    EXPECT_TRUE(Deterministic(out) == bytes) << "export differs from TensorFlow's bytes";
    if (Deterministic(out) != Deterministic(def)) {
      for (int i = 0; i < def.node_size(); ++i) {
        if (Deterministic(def.node(i)) != Deterministic(out.node(i))) {
          ADD_FAILURE() << def.node(i).DebugString() << "\n-----\n" << out.node(i).DebugString();
          break;
        }
      }
    }
  }
}

// The shape Strata infers for every fetched tensor must admit the tensor
// TensorFlow actually computed.
TEST(TfInteropTest, InferredShapesAgreeWithTensorFlow) {
  for (const std::string& c : Cases()) {
    if (!fs::exists(fs::path(kDir) / (c + ".expected.pb"))) continue;
    SCOPED_TRACE(c);
    auto g = ImportGraphDef(Load(c + ".pb"));
    ASSERT_TRUE(g.ok()) << g.status();
    int fetches = 0;
    const ::tensorflow::GraphDef box = Load(c + ".expected.pb");
    for (const auto& n : box.node()) {
      if (n.op() != "fetch") continue;
      ++fetches;
      auto in = ParseInputName(n.name());
      ASSERT_TRUE(in.ok()) << in.status();
      Node* node = (*g)->FindNode(in->node);
      ASSERT_NE(node, nullptr) << n.name();
      ASSERT_LT(in->index, node->num_outputs()) << n.name();
      auto want = Tensor::FromProto(n.attr().at("value").tensor());
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_EQ(node->output_type(in->index), want->dtype()) << n.name();
      const PartialTensorShape& got = node->output_shape(in->index);
      EXPECT_TRUE(got.IsCompatibleWith(want->shape()))
          << n.name() << ": inferred " << got.DebugString() << ", TensorFlow computed "
          << want->shape().DebugString();
    }
    EXPECT_GT(fetches, 0);
  }
}

TEST(TfInteropTest, ShapesAreAsPreciseAsTensorFlows) {
  auto mlp = ImportGraphDef(Load("mlp.pb"));
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  EXPECT_EQ((*mlp)->FindNode("probs")->output_shape(0), PartialTensorShape({-1, 10}));
  EXPECT_EQ((*mlp)->FindNode("relu1")->output_shape(0), PartialTensorShape({-1, 32}));
  auto rnd = ImportGraphDef(Load("random_ops.pb"));
  ASSERT_TRUE(rnd.ok()) << rnd.status();
  Node* u = (*rnd)->FindNode("uniform/RandomUniform");
  ASSERT_NE(u, nullptr);
  EXPECT_TRUE(u->op_def().is_stateful);
  EXPECT_EQ(u->output_shape(0), PartialTensorShape({3, 2}));
}

}  // namespace
}  // namespace strata
