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
// Each case with expected values then runs in a Session, and every fetch
// must match TensorFlow's: exactly for integers and bools, to 1e-5 relative
// (plus 1e-6 absolute, for values near zero) for floats.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "graph/graph_def_import.h"
#include "graph/passes/cse.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "runtime/constant_folding.h"
#include "runtime/session.h"

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
  EXPECT_THAT(cases, ::testing::IsSupersetOf({"mlp", "math_ops", "array_ops", "nn_ops", "control_deps",
                                              "random_ops", "keras_cnn", "keras_embedding", "keras_mha"}));
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
        "Conv2D", "MaxPool", "SparseSoftmaxCrossEntropyWithLogits", "RandomUniform",
        // Keras's layers (keras_cnn, keras_embedding, keras_mha)
        "StridedSlice", "AvgPool", "Erfc", "Squeeze", "GatherV2", "Less", "Einsum", "MatrixBandPart", "Prod",
        "BatchMatMulV2", "SquaredDifference", "StopGradient", "LogicalAnd", "FusedBatchNormV3"}) {
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

// Compares one fetched tensor with TensorFlow's; returns "" or what differs.
std::string Compare(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype()) {
    return "dtype " + DataTypeString(got.dtype()) + ", TensorFlow " + DataTypeString(want.dtype());
  }
  if (got.shape() != want.shape()) {
    return "shape " + got.shape().DebugString() + ", TensorFlow " + want.shape().DebugString();
  }
  const int64_t n = want.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    double g = 0, w = 0;
    bool exact = true;
    switch (want.dtype()) {
      case DT_FLOAT: g = got.data<float>()[i]; w = want.data<float>()[i]; exact = false; break;
      case DT_DOUBLE: g = got.data<double>()[i]; w = want.data<double>()[i]; exact = false; break;
      case DT_INT32: g = got.data<int32_t>()[i]; w = want.data<int32_t>()[i]; break;
      case DT_INT64: g = static_cast<double>(got.data<int64_t>()[i]);
                     w = static_cast<double>(want.data<int64_t>()[i]); break;
      case DT_BOOL: g = got.data<bool>()[i]; w = want.data<bool>()[i]; break;
      default: return "unexpected dtype " + DataTypeString(want.dtype());
    }
    const bool ok = exact ? g == w : std::abs(g - w) <= 1e-5 * std::abs(w) + 1e-6;
    if (!ok) {
      std::ostringstream msg;
      msg.precision(9);
      msg << "element " << i << ": " << g << ", TensorFlow " << w;
      return msg.str();
    }
  }
  return "";
}

// Runs every case with expected values in a session made with `opts` and
// compares each fetch; returns how many tensors were compared.
int RunAllAndCompare(const SessionOptions& opts) {
  int compared = 0;
  for (const std::string& c : Cases()) {
    if (!fs::exists(fs::path(kDir) / (c + ".expected.pb"))) continue;
    SCOPED_TRACE(c);
    auto session = Session::Create(Load(c + ".pb"), opts);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) continue;
    std::vector<std::pair<std::string, Tensor>> feeds;
    std::vector<std::string> fetches, targets;
    std::vector<Tensor> want;
    const ::tensorflow::GraphDef box = Load(c + ".expected.pb");
    for (const auto& n : box.node()) {
      if (n.op() == "target") {
        targets.push_back(n.name());
        continue;
      }
      auto t = Tensor::FromProto(n.attr().at("value").tensor());
      EXPECT_TRUE(t.ok()) << n.name() << ": " << t.status();
      if (!t.ok()) return 0;
      if (n.op() == "feed") {
        feeds.emplace_back(n.name(), *t);
      } else {
        fetches.push_back(n.name());
        want.push_back(*t);
      }
    }
    std::vector<Tensor> got;
    absl::Status st = (*session)->Run(feeds, fetches, targets, &got);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok() || got.size() != want.size()) continue;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(Compare(got[i], want[i]), "") << fetches[i];
      ++compared;
    }
  }
  return compared;
}

TEST(TfInteropTest, SessionMatchesTensorFlowsNumbers) {
  EXPECT_GT(RunAllAndCompare(SessionOptions()), 50);
}

// The graph passes must not change any result: constant folding and CSE on
// every step graph (array_ops computes ArgMax(flat, 1) twice, which CSE
// merges).
TEST(TfInteropTest, SessionWithGraphPassesMatchesTensorFlowsNumbers) {
  SessionOptions opts;
  opts.optimization_passes.push_back([](Graph* g) { return FoldConstants(g).status(); });
  opts.optimization_passes.push_back(
      [](Graph* g) { return EliminateCommonSubexpressions(g).status(); });
  EXPECT_GT(RunAllAndCompare(opts), 50);
}

TEST(TfInteropTest, CseMergesTensorFlowsDuplicateArgMax) {
  auto g = ImportGraphDef(Load("array_ops.pb"));
  ASSERT_TRUE(g.ok()) << g.status();
  auto changed = EliminateCommonSubexpressions(g->get());
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  // Their "dimension" Consts merge first, then the ArgMax nodes; the earlier
  // one survives.
  EXPECT_NE((*g)->FindNode("argmax"), nullptr);
  EXPECT_EQ((*g)->FindNode("argmax_out"), nullptr);
  EXPECT_EQ((*g)->FindNode("argmax_out/dimension"), nullptr);
  EXPECT_TRUE((*g)->CheckInputsConnected().ok());
}

}  // namespace
}  // namespace strata
