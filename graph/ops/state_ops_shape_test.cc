// The resource-variable builders' attrs and shape functions
// (graph/ops/state_ops.h); their kernels are tested in
// kernels/cpu/variable_kernels_test.cc.
#include <cstdint>
#include <string>

#include "gmock/gmock.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/state_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

TEST(StateShapeFnTest, ResourceScatterTakesItsTypesFromItsInputsAndIsStateful) {
  Scope s = Scope::NewRootScope();
  Output w = ops::VarHandleOp(s.WithOpName("w"), DT_FLOAT, PartialTensorShape({10, 3}));
  Output ids = ops::Placeholder(s, DT_INT64, PartialTensorShape({-1, 2}));
  Output rows = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({-1, 2, 3}));
  Node* add = ops::ResourceScatterAdd(s.WithOpName("add"), w, ids, rows);
  Node* sub = ops::ResourceScatterSub(s.WithOpName("sub"), w, ids, ops::Const(s, 1.f));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_NE(add, nullptr);
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(add->type_string(), "ResourceScatterAdd");
  EXPECT_EQ(sub->type_string(), "ResourceScatterSub");
  EXPECT_EQ(add->num_outputs(), 0);
  EXPECT_TRUE(add->op_def().is_stateful);
  EXPECT_TRUE(sub->op_def().is_stateful);
  DataType dtype = DT_INVALID, tindices = DT_INVALID;
  ASSERT_TRUE(GetAttr(add->attrs(), "dtype", &dtype).ok());
  ASSERT_TRUE(GetAttr(add->attrs(), "Tindices", &tindices).ok());
  EXPECT_EQ(dtype, DT_FLOAT);
  EXPECT_EQ(tindices, DT_INT64);
}

TEST(StateShapeFnTest, ResourceScatterUpdatesMustStartWithIndicesShape) {
  Scope s = Scope::NewRootScope();
  Output w = ops::VarHandleOp(s, DT_FLOAT, PartialTensorShape({10, 3}));
  Output ids = ops::Placeholder(s, DT_INT32, PartialTensorShape({4}));
  ops::ResourceScatterAdd(s.WithOpName("bad_scatter"), w, ids,
                          ops::Placeholder(s, DT_FLOAT, PartialTensorShape({5, 3})));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("bad_scatter"));
  EXPECT_THAT(
      s.status().message(),
      HasSubstr("updates of shape [5,3] must be a scalar or start with indices' shape [4]"));
  // A dtype the op does not take.
  Scope t = Scope::NewRootScope();
  Output b = ops::VarHandleOp(t, DT_BOOL, PartialTensorShape({2}));
  ops::ResourceScatterSub(t.WithOpName("bool_scatter"), b, ops::Const<int32_t>(t, {0}),
                          ops::Const(t, Tensor::FromVector<bool>({true})));
  EXPECT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("bool_scatter"));
}

}  // namespace
}  // namespace strata
