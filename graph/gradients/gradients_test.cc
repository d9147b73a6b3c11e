// AddSymbolicGradients on whole models and its contract: which inputs get
// zeros, where the backward pass stops, the errors, and that the gradient
// graph has no needless ops.
#include "graph/gradients/gradients.h"

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "graph/gradients/grad_registry.h"
#include "graph/gradients/gradient_checker.h"
#include "graph/op_registry.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/ops/nn_ops.h"
#include "gtest/gtest.h"
#include "runtime/session.h"

namespace strata {
namespace {

Tensor Doubles(std::vector<double> v, const TensorShape& shape) {
  return Tensor::FromVector<double>(v, shape);
}

// Deterministic values in [-1, 1] that are not symmetric in any way.
Tensor Values(const TensorShape& shape, double seed) {
  Tensor t(DT_DOUBLE, shape);
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    t.data<double>()[i] = std::sin(seed + 1.7 * static_cast<double>(i));
  }
  return t;
}

std::vector<Tensor> RunGraph(const Scope& root, const std::vector<std::pair<std::string, Tensor>>& feeds,
                             const OutputList& fetches) {
  auto session = Session::Create(root);
  EXPECT_TRUE(session.ok()) << session.status();
  std::vector<std::string> names;
  for (const Output& o : fetches) names.push_back(o.name());
  std::vector<Tensor> out;
  absl::Status s = (*session)->Run(feeds, names, {}, &out);
  EXPECT_TRUE(s.ok()) << s;
  out.resize(fetches.size());
  // Outputs can live in the session's device memory, which goes with it.
  for (Tensor& t : out) t = t.IsInitialized() ? t.DeepCopy() : t;
  return out;
}

int CountOps(const Graph& g, const std::string& op, const std::string& prefix = "gradients") {
  int n = 0;
  for (Node* node : g.nodes()) {
    if (node->type_string() == op && node->name().rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

// A two-layer perceptron on 4 examples: x [4,3] -> 5 hidden (ReLU) -> 3
// classes, mean sparse softmax cross-entropy.
TEST(GradientsTest, MlpMatchesFiniteDifferences) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE, PartialTensorShape({-1, 3}));
  Output w1 = ops::Placeholder(root.WithOpName("w1"), DT_DOUBLE, PartialTensorShape({3, 5}));
  Output b1 = ops::Placeholder(root.WithOpName("b1"), DT_DOUBLE, PartialTensorShape({5}));
  Output w2 = ops::Placeholder(root.WithOpName("w2"), DT_DOUBLE, PartialTensorShape({5, 3}));
  Output b2 = ops::Placeholder(root.WithOpName("b2"), DT_DOUBLE, PartialTensorShape({3}));
  Output labels = ops::Const<int32_t>(root, {2, 0, 1, 2});
  Output h = ops::Relu(root, ops::BiasAdd(root, ops::MatMul(root, x, w1), b1));
  Output logits = ops::BiasAdd(root, ops::MatMul(root, h, w2), b2);
  auto xent = ops::SparseSoftmaxCrossEntropyWithLogits(root, logits, labels);
  Output loss = ops::Mean(root, xent.loss, ops::Const(root, 0));
  ASSERT_TRUE(root.ok()) << root.status();

  // Hidden pre-activations stay away from 0 (Relu's kink) for these values.
  std::vector<Tensor> values = {Values({4, 3}, 0.1), Values({3, 5}, 1.3), Values({5}, 2.9),
                                Values({5, 3}, 4.2), Values({3}, 5.5)};
  absl::StatusOr<double> err =
      testing::MaxGradientError(root, {x, w1, b1, w2, b2}, values, loss, {});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-7);
}

TEST(GradientsTest, ConvNetMatchesFiniteDifferences) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE, PartialTensorShape({-1, 4, 4, 1}));
  Output f = ops::Placeholder(root.WithOpName("f"), DT_DOUBLE, PartialTensorShape({2, 2, 1, 2}));
  Output w = ops::Placeholder(root.WithOpName("w"), DT_DOUBLE, PartialTensorShape({8, 3}));
  Output conv = ops::Tanh(root, ops::Conv2D(root, x, f, {1, 1, 1, 1}, "SAME"));
  Output pooled = ops::MaxPool(root, conv, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  Output flat = ops::Reshape(root, pooled, ops::Const<int32_t>(root, {-1, 8}));
  Output logits = ops::MatMul(root, flat, w);
  Output loss = ops::Mean(root, ops::Neg(root, ops::LogSoftmax(root, logits)),
                          ops::Const<int32_t>(root, {0, 1}));
  ASSERT_TRUE(root.ok()) << root.status();
  absl::StatusOr<double> err = testing::MaxGradientError(
      root, {x, f, w}, {Values({2, 4, 4, 1}, 0.3), Values({2, 2, 1, 2}, 1.1), Values({8, 3}, 2.2)},
      loss, {});
  ASSERT_TRUE(err.ok()) << err.status();
}

TEST(GradientsTest, OpWithoutGradientOnThePathNamesNodeAndOp) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output y = ops::ReluGrad(root.WithOpName("needs_second_order"), x, x);
  Output loss = ops::Sum(root, y, ops::Const(root, 0));
  OutputList grads;
  absl::Status s = AddSymbolicGradients(root, {loss}, {x}, &grads);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("needs_second_order"), std::string::npos) << s;
  EXPECT_NE(s.message().find("ReluGrad"), std::string::npos) << s;
}

TEST(GradientsTest, OpWithoutGradientOffThePathIsFine) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output unrelated = ops::Placeholder(root.WithOpName("u"), DT_DOUBLE);
  // Feeds the loss but does not depend on x: not on the path.
  Output side = ops::ReluGrad(root, unrelated, unrelated);
  Output loss = ops::Sum(root, ops::Mul(root, ops::Square(root, x), side), ops::Const(root, 0));
  OutputList grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {x}, &grads).ok());
  std::vector<Tensor> out =
      RunGraph(root, {{"x", Doubles({1, 2}, {2})}, {"u", Doubles({3, -1}, {2})}}, grads);
  EXPECT_EQ(out[0].data<double>()[0], 6);  // 2 * x * relu'(u) * u
  EXPECT_EQ(out[0].data<double>()[1], 0);
}

// loss = sum(x * StopGradient(x)): the stopped use is a constant, so the
// gradient is x, not 2x.
TEST(GradientsTest, StopGradientStopsTheFlowButPassesTheValue) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output stopped = ops::StopGradient(root, x);
  Output loss = ops::Sum(root, ops::Mul(root, x, stopped), ops::Const(root, 0));
  OutputList grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {x}, &grads).ok());
  std::vector<Tensor> out = RunGraph(root, {{"x", Doubles({1.5, -2}, {2})}}, {grads[0], loss});
  EXPECT_EQ(out[0].data<double>()[0], 1.5);
  EXPECT_EQ(out[0].data<double>()[1], -2);
  EXPECT_EQ(out[1].data<double>()[0], 1.5 * 1.5 + 4);
}

TEST(GradientsTest, UnconnectedInputsGetZerosOrNothing) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output unused = ops::Placeholder(root.WithOpName("unused"), DT_DOUBLE);
  Output index = ops::Placeholder(root.WithOpName("index"), DT_INT32);
  Output loss = ops::Sum(root, ops::Square(root, x), ops::Const(root, 0));
  OutputList grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {x, unused, index}, &grads).ok());
  ASSERT_EQ(grads.size(), 3u);
  EXPECT_FALSE(grads[2].ok());
  EXPECT_EQ(grads[1].node()->type_string(), "ZerosLike");
  std::vector<Tensor> out = RunGraph(
      root, {{"x", Doubles({1, 2}, {2})}, {"unused", Doubles({5, 6, 7}, {3})}}, {grads[0], grads[1]});
  EXPECT_EQ(out[0].data<double>()[1], 4);
  ASSERT_EQ(out[1].NumElements(), 3);
  EXPECT_EQ(out[1].data<double>()[2], 0);
}

// x feeds the loss twice, once through Shape (no gradient): only the
// differentiable use contributes, and an integer round trip stops the flow.
TEST(GradientsTest, NonDifferentiableOpsStopTheFlow) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output n = ops::Cast(root, ops::Shape(root, x), DT_DOUBLE);  // [len]
  Output rounded = ops::Cast(root, ops::Cast(root, x, DT_INT32), DT_DOUBLE);
  Output loss = ops::Sum(root, ops::AddV2(root, ops::Mul(root, x, n), rounded),
                         ops::Const(root, 0));
  OutputList grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {x}, &grads).ok());
  std::vector<Tensor> out = RunGraph(root, {{"x", Doubles({1.5, 2.5, -1}, {3})}}, grads);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[0].data<double>()[i], 3);
}

TEST(GradientsTest, SeedsScaleTheGradient) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output y = ops::Square(root, x);
  Output seed = ops::Placeholder(root.WithOpName("seed"), DT_DOUBLE);
  OutputList grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, {seed}, &grads).ok());
  std::vector<Tensor> out =
      RunGraph(root, {{"x", Doubles({1, 2}, {2})}, {"seed", Doubles({10, 100}, {2})}}, grads);
  EXPECT_EQ(out[0].data<double>()[0], 20);
  EXPECT_EQ(out[0].data<double>()[1], 400);
}

TEST(GradientsTest, OutputThatIsAlsoAnInput) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output y = ops::Mul(root, x, ops::Const(root, 3.0));
  // d(x + y)/dx with both x and y outputs: 1 + 3; d/dy: 1.
  OutputList grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {x, y}, {x, y}, &grads).ok());
  std::vector<Tensor> out = RunGraph(root, {{"x", Doubles({2}, {1})}}, grads);
  EXPECT_EQ(out[0].data<double>()[0], 4);
  EXPECT_EQ(out[1].data<double>()[0], 1);
}

TEST(GradientsTest, BadArgumentsAreInvalidArgument) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output i = ops::Placeholder(root.WithOpName("i"), DT_INT32);
  OutputList grads;
  EXPECT_EQ(AddSymbolicGradients(root, {Output()}, {x}, &grads).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status int_out = AddSymbolicGradients(root, {i}, {x}, &grads);
  EXPECT_EQ(int_out.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(int_out.message().find("int32"), std::string::npos) << int_out;
  EXPECT_EQ(AddSymbolicGradients(root, {x}, {x}, {}, &grads).code(),
            absl::StatusCode::kInvalidArgument);
  Output float_seed = ops::Const(root, 1.0f);
  EXPECT_EQ(AddSymbolicGradients(root, {x}, {x}, {float_seed}, &grads).code(),
            absl::StatusCode::kInvalidArgument);
  Scope other = Scope::NewRootScope();
  Output foreign = ops::Placeholder(other, DT_DOUBLE);
  EXPECT_EQ(AddSymbolicGradients(root, {x}, {foreign}, &grads).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(root.ok());
}

// ---- The gradient graph's shape ----------------------------------------------

TEST(GradientsTest, SingleConsumersNeedNoAddNAndEqualShapesNoReduction) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({4, 3}));
  Output w = ops::Placeholder(root.WithOpName("w"), DT_FLOAT, PartialTensorShape({4, 3}));
  Output loss = ops::Sum(root, ops::Mul(root, x, w), ops::Const<int32_t>(root, {0, 1}));
  OutputList grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {x, w}, &grads).ok());
  const Graph& g = *root.graph();
  EXPECT_EQ(CountOps(g, "AddN"), 0);
  EXPECT_EQ(CountOps(g, "BroadcastGradientArgs"), 0);
  EXPECT_EQ(CountOps(g, "Shape"), 0);
  EXPECT_EQ(CountOps(g, "Sum"), 0);
  // The gradients' shapes are inferred.
  EXPECT_EQ(grads[0].shape(), PartialTensorShape({4, 3}));
}

TEST(GradientsTest, MultipleConsumersAreSummedOnce) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE, PartialTensorShape({2}));
  Output y = ops::AddV2(root, ops::Mul(root, x, x), ops::Exp(root, x));
  OutputList grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, &grads).ok());
  EXPECT_EQ(CountOps(*root.graph(), "AddN"), 1);
  std::vector<Tensor> out = RunGraph(root, {{"x", Doubles({0, 1}, {2})}}, grads);
  EXPECT_DOUBLE_EQ(out[0].data<double>()[0], 1);
  EXPECT_DOUBLE_EQ(out[0].data<double>()[1], 2 + std::exp(1.0));
}

// A bias over an unknown batch: which dims broadcast is still known
// statically, so no run-time shape ops are needed.
TEST(GradientsTest, BiasBroadcastOverUnknownBatchIsStatic) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialTensorShape({-1, 10}));
  Output b = ops::Placeholder(root.WithOpName("b"), DT_FLOAT, PartialTensorShape({10}));
  Output loss = ops::Mean(root, ops::Square(root, ops::AddV2(root, x, b)),
                          ops::Const<int32_t>(root, {0, 1}));
  OutputList grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {b}, &grads).ok());
  EXPECT_EQ(CountOps(*root.graph(), "BroadcastGradientArgs"), 0);
  EXPECT_EQ(grads[0].shape(), PartialTensorShape({10}));
}

TEST(GradientsTest, NamesAndDevicesFollowTheForwardNodes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output y = ops::Exp(root.WithOpName("e").WithDevice("/cpu:0"), x);
  OutputList first, second;
  ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, &first).ok());
  ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, &second).ok());
  EXPECT_EQ(first[0].node()->name().rfind("gradients/e_grad/", 0), 0u) << first[0].node()->name();
  EXPECT_EQ(second[0].node()->name().rfind("gradients_1/", 0), 0u) << second[0].node()->name();
  EXPECT_EQ(first[0].node()->requested_device(), "/cpu:0");
}

// ---- The registry -------------------------------------------------------------

TEST(GradientRegistryTest, RegisteredNamesAreOps) {
  const GradientRegistry& r = *GradientRegistry::Global();
  for (const auto& list : {r.DifferentiableOps(), r.NonDifferentiableOps()}) {
    for (const std::string& op : list) {
      EXPECT_TRUE(OpRegistry::Global()->LookUp(op).ok()) << op << " is not a registered op";
    }
  }
}

// Every op linked into this test is either differentiable, marked
// non-differentiable, one of the gradient ops whose own gradient (a second
// derivative) Strata does not build yet, or an op backpropagation through
// which is not built yet (conditionals, Qr): reaching one is NotFound naming
// it, never a silent zero gradient.
TEST(GradientRegistryTest, EveryLinkedOpIsDecided) {
  const std::set<std::string> second_order = {
      "ReluGrad",    "SigmoidGrad",         "TanhGrad",           "BiasAddGrad",
      "MaxPoolGrad", "Conv2DBackpropInput", "Conv2DBackpropFilter", "FusedBatchNormGradV3",
      "Switch",      "Merge",               "Qr"};
  std::vector<std::string> undecided;
  GradFunc fn;
  for (const std::string& op : OpRegistry::Global()->ListOps()) {
    if (GradientRegistry::Global()->Lookup(op, &fn) == GradientRegistry::Kind::kUnknown &&
        second_order.count(op) == 0) {
      undecided.push_back(op);
    }
  }
  EXPECT_TRUE(undecided.empty()) << "ops with neither STRATA_REGISTER_GRADIENT nor "
                                    "STRATA_NO_GRADIENT: "
                                 << absl::StrJoin(undecided, ", ");
}

TEST(GradientRegistryTest, DuplicateRegistrationIsAnError) {
  GradientRegistry r;
  auto fn = [](const Scope&, const Node&, const OutputList&, OutputList*) {
    return absl::OkStatus();
  };
  ASSERT_TRUE(r.Register("Foo", fn).ok());
  EXPECT_EQ(r.Register("Foo", fn).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(r.RegisterNoGradient("Foo").code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(r.RegisterNoGradient("Bar").ok());
  GradFunc out;
  EXPECT_EQ(r.Lookup("Bar", &out), GradientRegistry::Kind::kNoGradient);
  EXPECT_EQ(r.Lookup("Foo", &out), GradientRegistry::Kind::kDifferentiable);
  EXPECT_EQ(r.Lookup("Baz", &out), GradientRegistry::Kind::kUnknown);
}

}  // namespace
}  // namespace strata
