#include "kernels/cpu/cwise.h"

#include "gtest/gtest.h"

namespace strata {
namespace cwise {
namespace {

TEST(BCastTest, SameShapeCollapsesToOneDim) {
  BCast b(TensorShape{2, 3, 4}, TensorShape{2, 3, 4});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.output_shape(), (TensorShape{2, 3, 4}));
  EXPECT_EQ(b.x_reshape(), DimVector({24}));
  EXPECT_EQ(b.y_reshape(), DimVector({24}));
  EXPECT_EQ(b.x_bcast(), DimVector({1}));
  EXPECT_EQ(b.y_bcast(), DimVector({1}));
}

TEST(BCastTest, BiasLikeBroadcastIsRankTwo) {
  BCast b(TensorShape{8, 5, 5, 16}, TensorShape{16});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.output_shape(), (TensorShape{8, 5, 5, 16}));
  EXPECT_EQ(b.x_reshape(), DimVector({200, 16}));
  EXPECT_EQ(b.x_bcast(), DimVector({1, 1}));
  EXPECT_EQ(b.y_reshape(), DimVector({1, 16}));
  EXPECT_EQ(b.y_bcast(), DimVector({200, 1}));
  EXPECT_EQ(b.result(), DimVector({200, 16}));
}

TEST(BCastTest, OuterProductBroadcastsBothSides) {
  BCast b(TensorShape{3, 1}, TensorShape{1, 4});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.output_shape(), (TensorShape{3, 4}));
  EXPECT_EQ(b.x_reshape(), DimVector({3, 1}));
  EXPECT_EQ(b.x_bcast(), DimVector({1, 4}));
  EXPECT_EQ(b.y_reshape(), DimVector({1, 4}));
  EXPECT_EQ(b.y_bcast(), DimVector({3, 1}));
}

TEST(BCastTest, OnesInBothAreDropped) {
  BCast b(TensorShape{1, 1}, TensorShape{1});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.output_shape(), (TensorShape{1, 1}));
  EXPECT_EQ(b.rank(), 1);
  EXPECT_EQ(b.result(), DimVector({1}));
}

TEST(BCastTest, EmptyDimBroadcastsAgainstOne) {
  BCast b(TensorShape{0, 3}, TensorShape{1, 3});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.output_shape(), (TensorShape{0, 3}));
  EXPECT_EQ(b.output_shape().num_elements(), 0);
}

TEST(BCastTest, IncompatibleShapesAreAnError) {
  BCast b(TensorShape{2, 3}, TensorShape{4});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("[2,3] vs. [4]"), std::string::npos) << b.status();
}

TEST(FunctorTest, IntegerPowIsExact) {
  Pow<int64_t> p;
  EXPECT_EQ(p(3, 0), 1);
  EXPECT_EQ(p(3, 5), 243);
  EXPECT_EQ(p(-2, 3), -8);
  EXPECT_EQ(p(10, 12), 1000000000000LL);
  EXPECT_FLOAT_EQ(Pow<float>()(2.f, 0.5f), std::sqrt(2.f));
}

}  // namespace
}  // namespace cwise
}  // namespace strata
