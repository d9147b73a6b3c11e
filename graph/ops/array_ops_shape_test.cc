// The array op builders' shape functions (graph/ops/array_ops.h): full
// shapes from constant inputs, partial shapes from unknown ones, and errors
// that name the node.
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

TEST(ArrayShapeFnTest, ConstantInputsGiveFullShapes) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({6, 4}));
  EXPECT_EQ(ops::Reshape(s, x, ops::Const<int32_t>(s, {-1, 3})).shape(),
            PartialTensorShape({8, 3}));
  EXPECT_EQ(ops::Transpose(s, x, ops::Const<int32_t>(s, {1, 0})).shape(),
            PartialTensorShape({4, 6}));
  EXPECT_EQ(ops::Concat(s, {x, x}, ops::Const(s, -1)).shape(), PartialTensorShape({6, 8}));
  EXPECT_EQ(ops::Slice(s, x, ops::Const<int64_t>(s, {1, 0}), ops::Const<int64_t>(s, {-1, 2}))
                .shape(),
            PartialTensorShape({5, 2}));
  EXPECT_EQ(ops::Stack(s, {x, x, x}, 1).shape(), PartialTensorShape({6, 3, 4}));
  EXPECT_EQ(ops::Fill(s, ops::Const<int32_t>(s, {2, 5}), ops::Const(s, 1.f)).shape(),
            PartialTensorShape({2, 5}));
  EXPECT_EQ(ops::Shape(s, x).shape(), PartialTensorShape({2}));
  EXPECT_EQ(ops::ZerosLike(s, x).shape(), PartialTensorShape({6, 4}));
  EXPECT_EQ(ops::Range(s, ops::Const(s, 1), ops::Const(s, 10), ops::Const(s, 4)).shape(), PartialTensorShape({3}));
  EXPECT_EQ(ops::Range(s, ops::Const(s, 0.f), ops::Const(s, 1.f), ops::Const(s, 0.3f)).shape(),
            PartialTensorShape({4}));
  EXPECT_EQ(ops::Tile(s, x, ops::Const<int32_t>(s, {2, 0})).shape(), PartialTensorShape({12, 0}));
  OutputList parts = ops::Split(s, ops::Const(s, 0), x, 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].shape(), PartialTensorShape({2, 4}));
  OutputList v = ops::SplitV(s, x, ops::Const<int64_t>(s, {1, -1}), ops::Const(s, -1), 2);
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[1].shape(), PartialTensorShape({6, 3}));
  Output idx = ops::Placeholder(s, DT_INT32, PartialTensorShape({-1}));
  EXPECT_EQ(ops::OneHot(s, idx, ops::Const(s, 10), ops::Const(s, 1.f), ops::Const(s, 0.f), 0)
                .shape(),
            PartialTensorShape({10, -1}));
  EXPECT_TRUE(s.ok()) << s.status();
}

TEST(ArrayShapeFnTest, UnknownInputsGivePartialShapes) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({-1, 4}));
  Output dims = ops::Placeholder(s, DT_INT32, PartialTensorShape({3}));
  EXPECT_EQ(ops::Reshape(s, x, dims).shape(), PartialTensorShape({-1, -1, -1}));
  EXPECT_EQ(ops::Reshape(s, x, ops::Const<int32_t>(s, {2, -1})).shape(),
            PartialTensorShape({2, -1}));
  EXPECT_EQ(ops::Fill(s, dims, ops::Const(s, 1.f)).shape(), PartialTensorShape({-1, -1, -1}));
  Output axis = ops::Placeholder(s, DT_INT32, PartialTensorShape(DimVector{}));
  EXPECT_EQ(ops::Concat(s, {x, x}, axis).shape(), PartialTensorShape({-1, -1}));
  EXPECT_EQ(ops::Concat(s, {x, x}, ops::Const(s, 1)).shape(), PartialTensorShape({-1, 8}));
  Output begin = ops::Placeholder(s, DT_INT32, PartialTensorShape({2}));
  EXPECT_EQ(ops::Slice(s, x, begin, ops::Const<int32_t>(s, {3, -1})).shape(),
            PartialTensorShape({3, -1}));
  // A shape input claiming 2^40 dims (a malformed graph) gives unknown rank.
  Output huge = ops::Placeholder(s, DT_INT32, PartialTensorShape({int64_t{1} << 40}));
  EXPECT_TRUE(ops::Reshape(s, x, huge).shape().unknown_rank());
  Output unknown = ops::Placeholder(s, DT_FLOAT);
  EXPECT_TRUE(ops::Shape(s, unknown).shape() == PartialTensorShape({-1}));
  EXPECT_TRUE(ops::Stack(s, {unknown, x}).shape() == PartialTensorShape({2, -1, 4}));
  Output n = ops::Placeholder(s, DT_INT32, PartialTensorShape(DimVector{}));
  EXPECT_EQ(ops::Range(s, ops::Const(s, 0), n, ops::Const(s, 1)).shape(), PartialTensorShape({-1}));
  EXPECT_EQ(ops::Tile(s, x, ops::Const<int32_t>(s, {3, 2})).shape(), PartialTensorShape({-1, 8}));
  EXPECT_EQ(ops::Tile(s, x, ops::Placeholder(s, DT_INT32, PartialTensorShape({2}))).shape(),
            PartialTensorShape({-1, -1}));
  OutputList parts = ops::Split(s, axis, x, 2);
  EXPECT_EQ(parts[0].shape(), PartialTensorShape({-1, -1}));
  parts = ops::Split(s, ops::Const(s, 1), x, 2);
  EXPECT_EQ(parts[1].shape(), PartialTensorShape({-1, 2}));
  EXPECT_TRUE(s.ok()) << s.status();
}

TEST(ArrayShapeFnTest, ErrorsNameTheNode) {
  {
    Scope s = Scope::NewRootScope();
    Output x = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({6, 4}));
    ops::Split(s.WithOpName("bad_split"), ops::Const(s, 1), x, 3);
    EXPECT_THAT(s.status().message(), HasSubstr("bad_split"));
    EXPECT_THAT(s.status().message(), HasSubstr("3 equal parts"));
  }
  {
    Scope s = Scope::NewRootScope();
    ops::Range(s.WithOpName("bad_range"), ops::Const(s, 0), ops::Const(s, 5), ops::Const(s, -1));
    EXPECT_THAT(s.status().message(), HasSubstr("bad_range"));
  }
  {
    Scope s = Scope::NewRootScope();
    Output x = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({6, 4}));
    ops::Tile(s.WithOpName("bad_tile"), x, ops::Const<int32_t>(s, {2}));
    EXPECT_THAT(s.status().message(), HasSubstr("bad_tile"));
  }
  {
    Scope s = Scope::NewRootScope();
    Output x = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({2, 3}));
    ops::Reshape(s.WithOpName("bad_reshape"), x, ops::Const<int32_t>(s, {4, 2}));
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr("bad_reshape"));
    EXPECT_THAT(s.status().message(), HasSubstr("[2,3]"));
    EXPECT_THAT(s.status().message(), HasSubstr("[4,2]"));
  }
  {
    Scope s = Scope::NewRootScope();
    ops::Fill(s.WithOpName("bad_fill"), ops::Const<int64_t>(s, {int64_t{1} << 62, 4}),
              ops::Const(s, 1.f));
    EXPECT_THAT(s.status().message(), HasSubstr("bad_fill"));
    EXPECT_THAT(s.status().message(), HasSubstr("2^63-1"));
  }
  {
    Scope s = Scope::NewRootScope();
    ops::Fill(s.WithOpName("neg_fill"), ops::Const<int32_t>(s, {3, -4}), ops::Const(s, 1.f));
    EXPECT_THAT(s.status().message(), HasSubstr("neg_fill"));
    EXPECT_THAT(s.status().message(), HasSubstr("negative"));
  }
  {
    Scope s = Scope::NewRootScope();
    Output x = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({2, 3}));
    ops::Transpose(s.WithOpName("bad_perm"), x, ops::Const<int32_t>(s, {1, 1}));
    EXPECT_THAT(s.status().message(), HasSubstr("bad_perm"));
  }
  {
    Scope s = Scope::NewRootScope();
    Output a = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({2, 3}));
    Output b = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({3, 3}));
    ops::Concat(s.WithOpName("bad_concat"), {a, b}, ops::Const(s, 1));
    EXPECT_THAT(s.status().message(), HasSubstr("bad_concat"));
  }
  {
    Scope s = Scope::NewRootScope();
    Output a = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({2, 3}));
    ops::Slice(s.WithOpName("bad_slice"), a, ops::Const<int32_t>(s, {1, 1}),
               ops::Const<int32_t>(s, {2, 1}));
    EXPECT_THAT(s.status().message(), HasSubstr("bad_slice"));
  }
}

TEST(ArrayShapeFnTest, DynamicPartitionOutputsKeepTheSliceShape) {
  Scope s = Scope::NewRootScope();
  Output data = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({6, 4, 3}));
  Output p2 = ops::Placeholder(s, DT_INT32, PartialTensorShape({6, -1}));
  OutputList parts = ops::DynamicPartition(s, data, p2, 3);
  ASSERT_EQ(parts.size(), 3u);
  for (const Output& p : parts) EXPECT_EQ(p.shape(), PartialTensorShape({-1, 3}));
  Output p1 = ops::Placeholder(s, DT_INT32, PartialTensorShape({6}));
  OutputList one = ops::DynamicPartition(s, data, p1, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].shape(), PartialTensorShape({-1, 4, 3}));
  Output unknown = ops::Placeholder(s, DT_INT32, PartialTensorShape::UnknownRank());
  EXPECT_TRUE(ops::DynamicPartition(s, data, unknown, 2)[1].shape().unknown_rank());
  Output any_data = ops::Placeholder(s, DT_FLOAT, PartialTensorShape::UnknownRank());
  EXPECT_TRUE(ops::DynamicPartition(s, any_data, p1, 2)[0].shape().unknown_rank());
  ASSERT_TRUE(s.ok()) << s.status();
  {
    Scope s = Scope::NewRootScope();
    Output data = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({6, 4}));
    ops::DynamicPartition(s.WithOpName("bad_partition"), data,
                          ops::Placeholder(s, DT_INT32, PartialTensorShape({4})), 2);
    EXPECT_THAT(s.status().message(), HasSubstr("bad_partition"));
    EXPECT_THAT(s.status().message(),
                HasSubstr("partitions' shape [4] must be a prefix of data's shape [6,4]"));
  }
}

TEST(ArrayShapeFnTest, DynamicStitchHasUnknownRowsAndTheSliceShape) {
  Scope s = Scope::NewRootScope();
  Output i0 = ops::Placeholder(s, DT_INT32, PartialTensorShape({2}));
  Output i1 = ops::Placeholder(s, DT_INT32, PartialTensorShape({3, -1}));
  Output d0 = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({2, -1, 5}));
  Output d1 = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({3, 2, 4, -1}));
  // The slice shape merges [?,5] from input 0 with [4,?] from input 1.
  EXPECT_EQ(ops::DynamicStitch(s, {i0, i1}, {d0, d1}).shape(), PartialTensorShape({-1, 4, 5}));
  // Constant indices do not make the rows known.
  EXPECT_EQ(ops::DynamicStitch(s, {ops::Const<int32_t>(s, {0, 1})}, {d0}).shape(),
            PartialTensorShape({-1, -1, 5}));
  Output unknown = ops::Placeholder(s, DT_FLOAT, PartialTensorShape::UnknownRank());
  EXPECT_TRUE(ops::DynamicStitch(s, {i0}, {unknown}).shape().unknown_rank());
  EXPECT_EQ(ops::DynamicStitch(s, {i0, i1}, {unknown, d1}).shape(),
            PartialTensorShape({-1, 4, -1}));
  ASSERT_TRUE(s.ok()) << s.status();
  {
    Scope s = Scope::NewRootScope();
    Output i0 = ops::Placeholder(s, DT_INT32, PartialTensorShape({2}));
    Output d0 = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({2, 5}));
    Output d1 = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({2, 6}));
    ops::DynamicStitch(s.WithOpName("bad_stitch"), {i0, i0}, {d0, d1});
    EXPECT_THAT(s.status().message(), HasSubstr("bad_stitch"));
    EXPECT_THAT(s.status().message(), HasSubstr("data[1] has shape [2,6]"));
  }
  {
    Scope s = Scope::NewRootScope();
    Output i0 = ops::Placeholder(s, DT_INT32, PartialTensorShape({3}));
    ops::DynamicStitch(s.WithOpName("short_data"), {i0},
                       {ops::Placeholder(s, DT_FLOAT, PartialTensorShape({2, 5}))});
    EXPECT_THAT(s.status().message(), HasSubstr("short_data"));
    EXPECT_THAT(s.status().message(), HasSubstr("does not start with indices[0]'s shape [3]"));
  }
  {
    Scope s = Scope::NewRootScope();
    Output i0 = ops::Placeholder(s, DT_INT32, PartialTensorShape({2}));
    Output d0 = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({2}));
    ops::DynamicStitch(s.WithOpName("uneven"), {i0, i0}, {d0});
    EXPECT_FALSE(s.ok());
  }
}

}  // namespace
}  // namespace strata
