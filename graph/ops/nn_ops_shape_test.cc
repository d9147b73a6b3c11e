// The nn op builders and shape functions (graph/ops/nn_ops.h): the shapes a
// small CNN gets while it is built, TensorFlow's attr defaults, NCHW shapes,
// the gradient ops' shapes from constant sizes, and errors that name the node
// and the shapes.

#include "absl/strings/match.h"
#include "graph/graph.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/nn_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

PartialTensorShape P(std::initializer_list<int64_t> dims) {
  return PartialTensorShape(absl::Span<const int64_t>(dims.begin(), dims.size()));
}

void ExpectShape(const Output& o, const PartialTensorShape& want) {
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o.shape(), want) << o.name() << ": " << o.shape().DebugString() << " vs "
                             << want.DebugString();
}

Output Filter(const Scope& s, int64_t kh, int64_t kw, int64_t ic, int64_t oc) {
  return ops::Placeholder(s, DT_FLOAT, P({kh, kw, ic, oc}));
}

TEST(NnOpsShapeTest, SmallCnnShapesFlowThroughTheBuilder) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, P({-1, 28, 28, 1}));
  Output conv1 = ops::Conv2D(root.WithOpName("conv1"), x, Filter(root, 5, 5, 1, 32),
                             {1, 1, 1, 1}, "SAME");
  Output b1 = ops::Placeholder(root, DT_FLOAT, P({32}));
  Output h1 = ops::Relu(root, ops::BiasAdd(root, conv1, b1));
  Output p1 = ops::MaxPool(root, h1, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  Output conv2 = ops::Conv2D(root, p1, Filter(root, 3, 3, 32, 64), {1, 2, 2, 1}, "SAME");
  Output conv3 = ops::Conv2D(root, conv2, Filter(root, 3, 3, 64, 8), {1, 1, 1, 1}, "VALID");
  Output logits = ops::Placeholder(root, DT_FLOAT, P({-1, 10}));
  Output labels = ops::Placeholder(root, DT_INT32, P({-1}));
  auto xent = ops::SparseSoftmaxCrossEntropyWithLogits(root, logits, labels);
  ASSERT_TRUE(root.ok()) << root.status();
  ExpectShape(conv1, P({-1, 28, 28, 32}));
  ExpectShape(h1, P({-1, 28, 28, 32}));
  ExpectShape(p1, P({-1, 14, 14, 32}));
  ExpectShape(conv2, P({-1, 7, 7, 64}));
  ExpectShape(conv3, P({-1, 5, 5, 8}));
  ExpectShape(ops::Sigmoid(root, conv3), P({-1, 5, 5, 8}));
  ExpectShape(ops::Tanh(root, conv3), P({-1, 5, 5, 8}));
  ExpectShape(ops::Softmax(root, logits), P({-1, 10}));
  ExpectShape(ops::LogSoftmax(root, logits), P({-1, 10}));
  ExpectShape(xent.loss, P({-1}));
  ExpectShape(xent.backprop, P({-1, 10}));
  EXPECT_EQ(xent.loss.index(), 0);
  EXPECT_EQ(xent.backprop.index(), 1);
  ExpectShape(ops::BiasAddGrad(root, h1), P({32}));
  ASSERT_TRUE(root.ok()) << root.status();

  // TensorFlow's defaults are filled in, and the label dtype is inferred.
  const AttrMap& a = conv1.node()->attrs();
  EXPECT_EQ(conv1.node()->name(), "conv1");
  EXPECT_TRUE(a.at("use_cudnn_on_gpu").b());
  EXPECT_EQ(a.at("data_format").s(), "NHWC");
  EXPECT_EQ(a.at("dilations").list().i_size(), 4);
  EXPECT_EQ(a.at("explicit_paddings").list().i_size(), 0);
  EXPECT_EQ(a.at("T").type(), DT_FLOAT);
  EXPECT_EQ(xent.loss.node()->attrs().at("Tlabels").type(), DT_INT32);
}

TEST(NnOpsShapeTest, NchwShapes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, P({8, 3, 32, 31}));
  ops::Conv2DOptions nchw;
  nchw.data_format = "NCHW";
  Output y = ops::Conv2D(root, x, Filter(root, 3, 3, 3, 16), {1, 1, 2, 2}, "SAME", nchw);
  ExpectShape(y, P({8, 16, 16, 16}));
  ExpectShape(ops::BiasAdd(root, y, ops::Placeholder(root, DT_FLOAT, P({16})), "NCHW"),
              P({8, 16, 16, 16}));
  ExpectShape(ops::BiasAddGrad(root, y, "NCHW"), P({16}));
  ExpectShape(ops::MaxPool(root, y, {1, 1, 3, 3}, {1, 1, 2, 2}, "VALID", "NCHW"),
              P({8, 16, 7, 7}));
  ASSERT_TRUE(root.ok()) << root.status();
}

TEST(NnOpsShapeTest, DilationAndUnknownDims) {
  Scope root = Scope::NewRootScope();
  ops::Conv2DOptions dilated;
  dilated.dilations = {1, 2, 2, 1};
  // A 3x3 window dilated by 2 spans 5 pixels: 9 - 5 + 1 = 5.
  ExpectShape(ops::Conv2D(root, ops::Placeholder(root, DT_FLOAT, P({2, 9, 9, 4})),
                          Filter(root, 3, 3, 4, 6), {1, 1, 1, 1}, "VALID", dilated),
              P({2, 5, 5, 6}));
  ExpectShape(ops::Conv2D(root, ops::Placeholder(root, DT_FLOAT, P({-1, -1, 10, -1})),
                          Filter(root, 3, 3, 4, 6), {1, 2, 2, 1}, "SAME"),
              P({-1, -1, 5, 6}));
  // SAME's output size needs no window size.
  ExpectShape(ops::Conv2D(root, ops::Placeholder(root, DT_FLOAT, P({2, 10, 9, 4})),
                          Filter(root, -1, -1, 4, 6), {1, 2, 2, 1}, "SAME"),
              P({2, 5, 5, 6}));
  ExpectShape(ops::Conv2D(root, ops::Placeholder(root, DT_FLOAT, P({2, 10, 9, 4})),
                          Filter(root, -1, 3, 4, 6), {1, 2, 2, 1}, "VALID"),
              P({2, -1, 4, 6}));
  ExpectShape(ops::Conv2D(root, ops::Placeholder(root, DT_FLOAT),
                          Filter(root, 3, 3, 4, 6), {1, 2, 2, 1}, "SAME"),
              P({-1, -1, -1, 6}));
  ExpectShape(ops::Relu(root, ops::Placeholder(root, DT_FLOAT)), PartialTensorShape());
  ASSERT_TRUE(root.ok()) << root.status();
}

TEST(NnOpsShapeTest, GradientOpShapes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, P({4, 9, 9, 3}));
  Output f = Filter(root, 3, 3, 3, 8);
  Output y = ops::Conv2D(root, x, f, {1, 2, 2, 1}, "SAME");
  ExpectShape(y, P({4, 5, 5, 8}));
  Output sizes = ops::Const<int32_t>(root, {4, 9, 9, 3});
  ExpectShape(ops::Conv2DBackpropInput(root, sizes, f, y, {1, 2, 2, 1}, "SAME"),
              P({4, 9, 9, 3}));
  // A non-constant sizes input leaves the spatial dims unknown.
  Output fed = ops::Placeholder(root, DT_INT32, P({4}));
  ExpectShape(ops::Conv2DBackpropInput(root, fed, f, y, {1, 2, 2, 1}, "SAME"), P({4, -1, -1, 3}));
  ExpectShape(ops::Conv2DBackpropFilter(root, x, ops::Const<int32_t>(root, {3, 3, 3, 8}), y,
                                        {1, 2, 2, 1}, "SAME"),
              P({3, 3, 3, 8}));
  Output p = ops::MaxPool(root, x, {1, 3, 3, 1}, {1, 2, 2, 1}, "VALID");
  ExpectShape(p, P({4, 4, 4, 3}));
  ExpectShape(ops::MaxPoolGrad(root, x, p, p, {1, 3, 3, 1}, {1, 2, 2, 1}, "VALID"),
              P({4, 9, 9, 3}));
  ExpectShape(ops::ReluGrad(root, ops::Placeholder(root, DT_FLOAT, P({-1, 3})),
                            ops::Placeholder(root, DT_FLOAT, P({2, -1}))),
              P({2, 3}));
  ExpectShape(ops::SigmoidGrad(root, y, y), P({4, 5, 5, 8}));
  ExpectShape(ops::TanhGrad(root, y, y), P({4, 5, 5, 8}));
  ASSERT_TRUE(root.ok()) << root.status();
}

// Builds one op in a fresh scope and returns the scope's error.
template <typename Fn>
absl::Status BuildError(Fn fn) {
  Scope root = Scope::NewRootScope();
  fn(root);
  return root.status();
}

void ExpectError(const absl::Status& s, std::initializer_list<const char*> needles) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  for (const char* n : needles) {
    EXPECT_TRUE(absl::StrContains(s.message(), n)) << "'" << n << "' not in: " << s;
  }
}

TEST(NnOpsShapeTest, ErrorsNameTheNodeAndTheShapes) {
  ExpectError(BuildError([](const Scope& s) {
                ops::BiasAdd(s.WithOpName("bias"), ops::Placeholder(s, DT_FLOAT, P({-1, 3})),
                             ops::Placeholder(s, DT_FLOAT, P({4})));
              }),
              {"'bias'", "bias length 4", "[?,3]"});
  ExpectError(BuildError([](const Scope& s) {
                ops::BiasAdd(s.WithOpName("bias"), ops::Placeholder(s, DT_FLOAT, P({3})),
                             ops::Placeholder(s, DT_FLOAT, P({3})));
              }),
              {"'bias'", "rank at least 2"});
  ExpectError(BuildError([](const Scope& s) {
                ops::Conv2D(s.WithOpName("conv"), ops::Placeholder(s, DT_FLOAT, P({1, 8, 8, 3})),
                            Filter(s, 3, 3, 4, 2), {1, 1, 1, 1}, "SAME");
              }),
              {"'conv'", "in_channels 4", "[1,8,8,3]", "[3,3,4,2]"});
  ExpectError(BuildError([](const Scope& s) {
                ops::Conv2D(s.WithOpName("conv"), ops::Placeholder(s, DT_FLOAT, P({1, 2, 8, 3})),
                            Filter(s, 3, 3, 3, 2), {1, 1, 1, 1}, "VALID");
              }),
              {"'conv'", "larger than the input", "[1,2,8,3]"});
  ExpectError(BuildError([](const Scope& s) {
                ops::Conv2D(s.WithOpName("conv"), ops::Placeholder(s, DT_FLOAT, P({1, 8, 8, 3})),
                            Filter(s, 3, 3, 3, 2), {1, 1, 1, 1}, "FULL");
              }),
              {"'conv'", "FULL"});
  ExpectError(BuildError([](const Scope& s) {
                ops::Conv2D(s.WithOpName("conv"), ops::Placeholder(s, DT_FLOAT, P({1, 8, 8, 3})),
                            Filter(s, 3, 3, 3, 2), {1, 1, 1}, "SAME");
              }),
              {"'conv'", "strides", "4 entries"});
  ExpectError(BuildError([](const Scope& s) {
                ops::MaxPool(s.WithOpName("pool"), ops::Placeholder(s, DT_FLOAT, P({1, 2, 2, 3})),
                             {1, 3, 3, 1}, {1, 1, 1, 1}, "VALID");
              }),
              {"'pool'", "larger than the input"});
  ExpectError(BuildError([](const Scope& s) {
                ops::SparseSoftmaxCrossEntropyWithLogits(
                    s.WithOpName("xent"), ops::Placeholder(s, DT_FLOAT, P({8, 10})),
                    ops::Placeholder(s, DT_INT32, P({7})));
              }),
              {"'xent'", "[8,10]", "[7]"});
  ExpectError(BuildError([](const Scope& s) {
                ops::ReluGrad(s.WithOpName("rg"), ops::Placeholder(s, DT_FLOAT, P({2, 3})),
                              ops::Placeholder(s, DT_FLOAT, P({3, 2})));
              }),
              {"'rg'", "[2,3]", "[3,2]"});
  ExpectError(BuildError([](const Scope& s) {
                Output y = ops::Placeholder(s, DT_FLOAT, P({1, 4, 4, 2}));
                ops::Conv2DBackpropInput(s.WithOpName("dx"), ops::Const<int32_t>(s, {1, 5, 5, 3}),
                                         Filter(s, 3, 3, 3, 2), y, {1, 1, 1, 1}, "VALID");
              }),
              {"'dx'", "out_backprop [1,4,4,2]", "[1,3,3,2]"});
  // Types outside the op's allowed list are rejected when the node is added.
  EXPECT_FALSE(BuildError([](const Scope& s) {
                 ops::Softmax(s, ops::Placeholder(s, DT_INT32, P({2, 3})));
               }).ok());
}

// A Conv2D node as TensorFlow writes it into a GraphDef, every attr spelled
// out, imports and gets its shape.
TEST(NnOpsShapeTest, TensorFlowConv2DNodeDefValidates) {
  Graph g;
  ::tensorflow::NodeDef in;
  in.set_name("input");
  in.set_op("Placeholder");
  (*in.mutable_attr())["dtype"] = MakeAttr(DT_FLOAT);
  (*in.mutable_attr())["shape"] = MakeAttr(P({2, 6, 6, 3}));
  ::tensorflow::NodeDef filt = in;
  filt.set_name("filter");
  (*filt.mutable_attr())["shape"] = MakeAttr(P({3, 3, 3, 5}));
  ::tensorflow::NodeDef conv;
  conv.set_name("Conv2D");
  conv.set_op("Conv2D");
  auto& a = *conv.mutable_attr();
  a["T"] = MakeAttr(DT_FLOAT);
  a["strides"] = MakeAttr(std::vector<int64_t>{1, 1, 1, 1});
  a["padding"] = MakeAttr("VALID");
  a["use_cudnn_on_gpu"] = MakeAttr(true);
  a["data_format"] = MakeAttr("NHWC");
  a["dilations"] = MakeAttr(std::vector<int64_t>{1, 1, 1, 1});
  a["explicit_paddings"].mutable_list();  // an empty list, as TensorFlow writes it
  auto xi = g.AddNode(in);
  auto fi = g.AddNode(filt);
  auto ci = g.AddNode(conv);
  ASSERT_TRUE(xi.ok() && fi.ok()) << xi.status() << fi.status();
  ASSERT_TRUE(ci.ok()) << ci.status();
  ASSERT_TRUE(g.InferShapes(*xi).ok());
  ASSERT_TRUE(g.InferShapes(*fi).ok());
  ASSERT_TRUE(g.AddEdge(*xi, 0, *ci, 0).ok());
  ASSERT_TRUE(g.AddEdge(*fi, 0, *ci, 1).ok());
  ASSERT_TRUE(g.InferShapes(*ci).ok());
  EXPECT_EQ((*ci)->output_shape(0), P({2, 4, 4, 5}));
}

TEST(WindowedOutputTest, MatchesTensorFlowsRules) {
  struct Case {
    int64_t in, k, d, s;
    Padding p;
    int64_t size, before, after;
  };
  const Case cases[] = {
      {5, 3, 1, 2, Padding::kSame, 3, 1, 1},  {6, 4, 1, 1, Padding::kSame, 6, 1, 2},
      {6, 3, 1, 2, Padding::kSame, 3, 0, 1},  {7, 3, 1, 2, Padding::kValid, 3, 0, 0},
      {9, 3, 2, 1, Padding::kValid, 5, 0, 0}, {9, 3, 2, 1, Padding::kSame, 9, 2, 2},
      {4, 1, 1, 3, Padding::kValid, 2, 0, 0}, {0, 3, 1, 1, Padding::kSame, 0, 1, 1},
  };
  for (const Case& c : cases) {
    auto w = ComputeWindowedOutput(c.in, c.k, c.d, c.s, c.p);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->size, c.size) << c.in << " " << c.k;
    EXPECT_EQ(w->pad_before, c.before) << c.in << " " << c.k;
    EXPECT_EQ(w->pad_after, c.after) << c.in << " " << c.k;
  }
  EXPECT_FALSE(ComputeWindowedOutput(2, 3, 1, 1, Padding::kValid).ok());
  EXPECT_FALSE(ComputeWindowedOutput(5, 3, 1, 0, Padding::kSame).ok());
  EXPECT_FALSE(ComputeWindowedOutput(5, 3, 1, 1, Padding::kExplicit).ok());
}

}  // namespace
}  // namespace strata
