// Shape functions of the math ops, exercised through the builder (Scope +
// ops::): broadcasting, MatMul (and its error naming the node), reductions
// with constant and unknown axes, ArgMax, AddN, Select/SelectV2, Equal,
// Cast; plus the TensorFlow attrs a GraphDef node carries.

#include <string>

#include "graph/ops/core_ops.h"
#include "graph/ops/math_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

PartialTensorShape P(std::initializer_list<int64_t> dims) {
  return PartialTensorShape(DimVector(dims));
}

Output In(const Scope& s, PartialTensorShape shape, DataType dt = DT_FLOAT) {
  return ops::Placeholder(s, dt, shape);
}

TEST(MathShapeTest, BinaryOpsBroadcast) {
  Scope s = Scope::NewRootScope();
  Output z = ops::AddV2(s, In(s, P({2, 1, 3})), In(s, P({4, 1})));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(z.shape(), P({2, 4, 3}));
  Output w = ops::Mul(s, In(s, P({-1, 3})), In(s, P({3})));
  EXPECT_EQ(w.shape(), P({-1, 3}));
  Output u = ops::Sub(s, In(s, PartialTensorShape()), In(s, P({3})));
  EXPECT_TRUE(u.shape().unknown_rank());
  Output e = ops::Equal(s, In(s, P({5})), In(s, P({})));
  EXPECT_EQ(e.type(), DT_BOOL);
  EXPECT_EQ(e.shape(), P({5}));
  Output sq = ops::Square(s, In(s, P({2, -1})));
  EXPECT_EQ(sq.shape(), P({2, -1}));
  EXPECT_TRUE(s.ok()) << s.status();
}

TEST(MathShapeTest, IncompatibleBroadcastIsAnError) {
  Scope s = Scope::NewRootScope();
  Output z = ops::AddV2(s.WithOpName("bad_add"), In(s, P({2, 3})), In(s, P({4})));
  EXPECT_FALSE(z.ok());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("bad_add"), std::string::npos) << s.status();
}

TEST(MathShapeTest, EqualWithoutShapeErrorAcceptsMismatch) {
  Scope s = Scope::NewRootScope();
  Output e = ops::Equal(s, In(s, P({2})), In(s, P({3})),
                        ops::Equal::Attrs().IncompatibleShapeError(false));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(e.shape().unknown_rank());
}

TEST(MathShapeTest, MatMul) {
  Scope s = Scope::NewRootScope();
  EXPECT_EQ(ops::MatMul(s, In(s, P({2, 3})), In(s, P({3, 5}))).shape(), P({2, 5}));
  EXPECT_EQ(ops::MatMul(s, In(s, P({3, 2})), In(s, P({5, 3})),
                        ops::MatMul::Attrs().TransposeA(true).TransposeB(true))
                .shape(),
            P({2, 5}));
  EXPECT_EQ(ops::MatMul(s, In(s, P({-1, 3})), In(s, P({-1, -1}))).shape(), P({-1, -1}));
  ASSERT_TRUE(s.ok()) << s.status();
}

TEST(MathShapeTest, MatMulInnerMismatchNamesTheNodeAndShapes) {
  Scope s = Scope::NewRootScope();
  Output a = In(s, P({2, 3})), b = In(s, P({4, 5}));
  Output c = ops::MatMul(s.WithOpName("dense/logits"), a, b);
  EXPECT_FALSE(c.ok());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(s.status().message());
  EXPECT_NE(msg.find("dense/logits"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2,3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4,5]"), std::string::npos) << msg;
  // The scope keeps its first error; later ops are no-ops.
  EXPECT_FALSE(ops::Neg(s, a).ok());
}

TEST(MathShapeTest, MatMulNeedsMatrices) {
  Scope s = Scope::NewRootScope();
  ops::MatMul(s, In(s, P({2, 3, 4})), In(s, P({4, 5})));
  EXPECT_FALSE(s.ok());
}

TEST(MathShapeTest, ReductionsWithConstantAxes) {
  Scope s = Scope::NewRootScope();
  Output x = In(s, P({2, 3, 4}));
  EXPECT_EQ(ops::Sum(s, x, ops::Const<int32_t>(s, {1})).shape(), P({2, 4}));
  EXPECT_EQ(ops::Mean(s, x, ops::Const<int32_t>(s, {1}), ops::ReductionAttrs().KeepDims(true))
                .shape(),
            P({2, 1, 4}));
  EXPECT_EQ(ops::Max(s, x, ops::Const<int64_t>(s, {-1, 0})).shape(), P({3}));
  EXPECT_EQ(ops::Min(s, x, ops::Const(s, int32_t{2})).shape(), P({2, 3}));
  EXPECT_EQ(ops::Sum(s, x, ops::Const<int32_t>(s, {0, 1, 2})).shape(), P({}));
  EXPECT_EQ(ops::Sum(s, In(s, P({-1, 5})), ops::Const<int32_t>(s, {0})).shape(), P({5}));
  ASSERT_TRUE(s.ok()) << s.status();
}

TEST(MathShapeTest, ReductionsWithUnknownAxes) {
  Scope s = Scope::NewRootScope();
  Output x = In(s, P({2, 3, 4}));
  Output axes = In(s, P({-1}), DT_INT32);
  EXPECT_TRUE(ops::Sum(s, x, axes).shape().unknown_rank());
  EXPECT_EQ(ops::Sum(s, x, axes, ops::ReductionAttrs().KeepDims(true)).shape(), P({-1, -1, -1}));
  EXPECT_EQ(ops::Sum(s, x, In(s, P({0}), DT_INT32)).shape(), P({2, 3, 4}));
  ASSERT_TRUE(s.ok()) << s.status();
}

TEST(MathShapeTest, ReductionAxisOutOfRangeIsAnError) {
  Scope s = Scope::NewRootScope();
  ops::Sum(s.WithOpName("total"), In(s, P({2, 3})), ops::Const<int32_t>(s, {2}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("total"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("Invalid reduction dimension 2"), std::string::npos);
  Scope s2 = Scope::NewRootScope();
  ops::Mean(s2, In(s2, P({2, 3})), ops::Const<int32_t>(s2, {-3}));
  EXPECT_FALSE(s2.ok());
}

TEST(MathShapeTest, ClipByValueAndCumsum) {
  Scope s = Scope::NewRootScope();
  Output t = In(s, P({2, 3}));
  EXPECT_EQ(ops::ClipByValue(s, t, ops::Const(s, 0.f), ops::Const(s, 1.f)).shape(), P({2, 3}));
  EXPECT_EQ(ops::Cumsum(s, t, ops::Const(s, -1)).shape(), P({2, 3}));
  EXPECT_TRUE(s.ok()) << s.status();
  Scope bad = Scope::NewRootScope();
  ops::ClipByValue(bad.WithOpName("clip"), In(bad, P({2, 3})), In(bad, P({3})), ops::Const(bad, 1.f));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("clip"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("clip_value_min"), std::string::npos) << bad.status();
  Scope bad2 = Scope::NewRootScope();
  ops::Cumsum(bad2.WithOpName("running"), In(bad2, P({2, 3})), ops::Const(bad2, 2));
  ASSERT_FALSE(bad2.ok());
  EXPECT_NE(bad2.status().message().find("running"), std::string::npos) << bad2.status();
}

TEST(MathShapeTest, ArgMax) {
  Scope s = Scope::NewRootScope();
  Output x = In(s, P({2, 3, 4}));
  Output a = ops::ArgMax(s, x, ops::Const(s, int32_t{1}));
  EXPECT_EQ(a.shape(), P({2, 4}));
  EXPECT_EQ(a.type(), DT_INT64);
  Output b = ops::ArgMax(s, x, ops::Const(s, int64_t{-1}), ops::ArgMax::Attrs().OutputType(DT_INT32));
  EXPECT_EQ(b.shape(), P({2, 3}));
  EXPECT_EQ(b.type(), DT_INT32);
  EXPECT_EQ(ops::ArgMax(s, x, In(s, P({}), DT_INT32)).shape(), P({-1, -1}));
  ASSERT_TRUE(s.ok()) << s.status();
  ops::ArgMax(s, x, ops::Const(s, int32_t{3}));
  EXPECT_FALSE(s.ok());
}

TEST(MathShapeTest, AddNMergesShapes) {
  Scope s = Scope::NewRootScope();
  Output sum = ops::AddN(s, {In(s, P({2, -1})), In(s, P({-1, 3})), In(s, PartialTensorShape())});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(sum.shape(), P({2, 3}));
  ops::AddN(s, {In(s, P({2})), In(s, P({3}))});
  EXPECT_FALSE(s.ok());
}

TEST(MathShapeTest, SelectAndSelectV2) {
  Scope s = Scope::NewRootScope();
  Output t = In(s, P({4, 3})), e = In(s, P({4, 3}));
  EXPECT_EQ(ops::Select(s, In(s, P({4}), DT_BOOL), t, e).shape(), P({4, 3}));
  EXPECT_EQ(ops::Select(s, In(s, P({}), DT_BOOL), t, e).shape(), P({4, 3}));
  EXPECT_EQ(ops::SelectV2(s, In(s, P({2, 1, 1}), DT_BOOL), In(s, P({1, 3})), In(s, P({4, 1})))
                .shape(),
            P({2, 4, 3}));
  ASSERT_TRUE(s.ok()) << s.status();
  ops::Select(s, In(s, P({3}), DT_BOOL), t, e);
  EXPECT_FALSE(s.ok());
}

TEST(MathShapeTest, CastChangesTheDtypeOnly) {
  Scope s = Scope::NewRootScope();
  Output y = ops::Cast(s, In(s, P({2, -1})), DT_INT32);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(y.type(), DT_INT32);
  EXPECT_EQ(y.shape(), P({2, -1}));
}

TEST(MathShapeTest, TensorFlowMatMulNodeDefValidates) {
  // A MatMul node as TensorFlow 2.x writes it, grad_a/grad_b included.
  const OpDef* op = OpRegistry::Global()->LookUp("MatMul").value();
  ::tensorflow::NodeDef def;
  def.set_name("m");
  def.set_op("MatMul");
  auto& a = *def.mutable_attr();
  a["T"] = MakeAttr(DT_FLOAT);
  a["transpose_a"] = MakeAttr(false);
  a["transpose_b"] = MakeAttr(true);
  a["grad_a"] = MakeAttr(false);
  a["grad_b"] = MakeAttr(false);
  EXPECT_TRUE(ValidateAndCompleteAttrs(*op, &def).ok());
  ::tensorflow::NodeDef sum;
  sum.set_name("s");
  sum.set_op("Sum");
  (*sum.mutable_attr())["T"] = MakeAttr(DT_FLOAT);
  ASSERT_TRUE(ValidateAndCompleteAttrs(*OpRegistry::Global()->LookUp("Sum").value(), &sum).ok());
  EXPECT_EQ(sum.attr().at("Tidx").type(), DT_INT32);
  EXPECT_FALSE(sum.attr().at("keep_dims").b());
}

}  // namespace
}  // namespace strata
