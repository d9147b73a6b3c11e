// DynamicPartition and DynamicStitch on the CPU: exact outputs (TensorFlow's
// documented examples), every dtype through the byte copies, duplicates,
// the errors, the bound on merged's size, and the round trip that the
// DynamicPartition gradient relies on.
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/allocator.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

Tensor Ints(std::vector<int32_t> v, TensorShape shape) {
  return *Tensor::FromVector<int32_t>(v).Reshaped(shape);
}
Tensor Ints(std::vector<int32_t> v) { return Tensor::FromVector<int32_t>(v); }
Tensor Floats(std::vector<float> v, TensorShape shape) {
  return *Tensor::FromVector<float>(v).Reshaped(shape);
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.NumElements());
}

absl::StatusOr<std::vector<Tensor>> Partition(DeviceBase* dev, const Tensor& data,
                                              const Tensor& partitions, int64_t num_partitions) {
  return RunKernel(dev, "DynamicPartition", {data, partitions},
                   {{"num_partitions", MakeAttr(num_partitions)}});
}

absl::StatusOr<Tensor> Stitch(DeviceBase* dev, const std::vector<Tensor>& indices,
                              const std::vector<Tensor>& data) {
  auto out = RunKernelWithListInputs(dev, "DynamicStitch", {indices, data});
  if (!out.ok()) return out.status();
  return (*out)[0];
}

TEST(DynamicPartitionTest, SendsEachRowToItsPartitionInOrder) {
  StandaloneCpuDevice dev;
  // TensorFlow's example: rows 0, 2 to partition 0; row 3 to 1; rows 1, 4 to 2.
  Tensor data = Floats({0, 1, 10, 11, 20, 21, 30, 31, 40, 41}, {5, 2});
  auto out = Partition(&dev, data, Ints({0, 2, 0, 1, 2}), 3);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);
  EXPECT_EQ((*out)[0].shape(), (TensorShape{2, 2}));
  EXPECT_EQ(Values<float>((*out)[0]), (std::vector<float>{0, 1, 20, 21}));
  EXPECT_EQ((*out)[1].shape(), (TensorShape{1, 2}));
  EXPECT_EQ(Values<float>((*out)[1]), (std::vector<float>{30, 31}));
  EXPECT_EQ((*out)[2].shape(), (TensorShape{2, 2}));
  EXPECT_EQ(Values<float>((*out)[2]), (std::vector<float>{10, 11, 40, 41}));
}

TEST(DynamicPartitionTest, RankTwoPartitionsAnEmptyPartitionAndOtherDtypes) {
  StandaloneCpuDevice dev;
  // partitions [2, 3] over data [2, 3, 2]: slices of 2 elements, row-major.
  Tensor partitions = Ints({1, 0, 1, 3, 1, 0}, {2, 3});
  Tensor data(DT_INT8, TensorShape{2, 3, 2});
  for (int i = 0; i < 12; ++i) data.data<int8_t>()[i] = static_cast<int8_t>(i);
  auto out = Partition(&dev, data, partitions, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Values<int8_t>((*out)[0]), (std::vector<int8_t>{2, 3, 10, 11}));
  EXPECT_EQ(Values<int8_t>((*out)[1]), (std::vector<int8_t>{0, 1, 4, 5, 8, 9}));
  EXPECT_EQ((*out)[2].shape(), (TensorShape{0, 2}));
  EXPECT_EQ(Values<int8_t>((*out)[3]), (std::vector<int8_t>{6, 7}));
  // Data of the partitions' own shape: scalars, here int64.
  Tensor wide = *Tensor::FromVector<int64_t>({5, 6, 7, 8, 9, 10}).Reshaped({2, 3});
  out = Partition(&dev, wide, partitions, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[1].shape(), (TensorShape{3}));
  EXPECT_EQ(Values<int64_t>((*out)[1]), (std::vector<int64_t>{5, 7, 9}));
  // A scalar partition takes the whole of data.
  out = Partition(&dev, Floats({1, 2}, {2}), Tensor::Scalar<int32_t>(1), 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), (TensorShape{0, 2}));
  EXPECT_EQ((*out)[1].shape(), (TensorShape{1, 2}));
  EXPECT_EQ(Values<float>((*out)[1]), (std::vector<float>{1, 2}));
}

TEST(DynamicPartitionTest, APartitionOutOfRangeIsInvalidArgumentNamingPositionAndValue) {
  StandaloneCpuDevice dev;
  Tensor data = Floats({1, 2, 3, 4, 5, 6}, {2, 3});
  auto high = Partition(&dev, data, Ints({0, 1, 1, 3, 0, 1}, {2, 3}), 3);
  EXPECT_EQ(high.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(high.status().message(),
              HasSubstr("DynamicPartition partitions[1,0] = 3 is not in [0, 3)"));
  auto negative = Partition(&dev, Floats({1, 2}, {2}), Ints({0, -1}), 2);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(),
              HasSubstr("DynamicPartition partitions[1] = -1 is not in [0, 2)"));
  auto not_prefix = Partition(&dev, data, Ints({0, 1, 0}), 2);
  EXPECT_EQ(not_prefix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      not_prefix.status().message(),
      HasSubstr("DynamicPartition partitions' shape [3] must be a prefix of data's shape [2,3]"));
}

TEST(DynamicStitchTest, MergesSlicesAtTheirIndices) {
  StandaloneCpuDevice dev;
  // TensorFlow's example: a scalar, a vector and a matrix of indices.
  std::vector<Tensor> indices = {Tensor::Scalar<int32_t>(6), Ints({4, 1}),
                                 Ints({5, 2, 0, 3}, {2, 2})};
  std::vector<Tensor> data = {Floats({61, 62}, {2}), Floats({41, 42, 11, 12}, {2, 2}),
                              Floats({51, 52, 21, 22, 1, 2, 31, 32}, {2, 2, 2})};
  auto merged = Stitch(&dev, indices, data);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->shape(), (TensorShape{7, 2}));
  EXPECT_EQ(Values<float>(*merged),
            (std::vector<float>{1, 2, 11, 12, 21, 22, 31, 32, 41, 42, 51, 52, 61, 62}));
}

TEST(DynamicStitchTest, LaterDuplicatesWinAndUncoveredRowsAreZero) {
  StandaloneCpuDevice dev;
  // Row 2 twice in indices[0] (the later position wins), row 0 in both
  // inputs (indices[1] wins), row 1 nowhere (zeros), row 3 once.
  std::vector<Tensor> indices = {Ints({2, 0, 2}), Ints({3, 0})};
  std::vector<Tensor> data = {*Tensor::FromVector<int64_t>({1, 1, 2, 2, 3, 3}).Reshaped({3, 2}),
                              *Tensor::FromVector<int64_t>({4, 4, 5, 5}).Reshaped({2, 2})};
  auto merged = Stitch(&dev, indices, data);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(merged->shape(), (TensorShape{4, 2}));
  EXPECT_EQ(Values<int64_t>(*merged), (std::vector<int64_t>{5, 5, 0, 0, 3, 3, 4, 4}));
  // Without any index, merged has no rows but keeps the slices' shape.
  auto empty = Stitch(&dev, {Ints({})}, {Floats({}, {0, 3})});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->shape(), (TensorShape{0, 3}));
}

TEST(DynamicStitchTest, ANegativeIndexOrAShapeMismatchIsInvalidArgumentNamingTheInput) {
  StandaloneCpuDevice dev;
  auto negative = Stitch(&dev, {Ints({0}), Ints({1, 0, -2, 3}, {2, 2})},
                         {Floats({1}, {1}), Floats({1, 2, 3, 4}, {2, 2})});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(),
              HasSubstr("DynamicStitch indices[1][1,0] = -2 is negative"));
  // data[1] must be indices[1]'s shape + [2], as data[0] says.
  auto suffix =
      Stitch(&dev, {Ints({0}), Ints({1})}, {Floats({1, 2}, {1, 2}), Floats({1, 2, 3}, {1, 3})});
  EXPECT_EQ(suffix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(suffix.status().message(), HasSubstr("DynamicStitch data[1] has shape [1,3]"));
  EXPECT_THAT(suffix.status().message(), HasSubstr("[2]"));
  auto prefix = Stitch(&dev, {Ints({0, 1})}, {Floats({1, 2, 3}, {3})});
  EXPECT_EQ(prefix.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      prefix.status().message(),
      HasSubstr(
          "DynamicStitch data[0] has shape [3], which does not start with indices[0]'s shape [2]"));
}

// A CPU device whose allocator holds at most `limit` bytes.
class LimitedCpuDevice : public StandaloneCpuDevice {
 public:
  explicit LimitedCpuDevice(int64_t limit) : alloc_("limited", limit) {}
  Allocator* allocator() const override { return &alloc_; }

 private:
  mutable TrackingCpuAllocator alloc_;
};

TEST(DynamicStitchTest, AHugeIndexIsRefusedBeforeAllocating) {
  // Larger than the host's memory: 2^31 rows of 4 KiB.
  StandaloneCpuDevice dev;
  auto huge = Stitch(&dev, {Ints({0, 2147483647})}, {Tensor(DT_FLOAT, TensorShape{2, 1024})});
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      huge.status().message(),
      HasSubstr(
          "DynamicStitch: the largest index, 2147483647 in indices[0], would make merged float "
          "[2147483648,1024] larger than the host's physical memory"));
  // Larger than the allocator's limit of 1 MiB: 300000 rows of 4 bytes.
  LimitedCpuDevice limited(1 << 20);
  auto over = Stitch(&limited, {Ints({1}), Ints({299999})}, {Floats({1}, {1}), Floats({2}, {1})});
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(over.status().message(), HasSubstr("299999 in indices[1]"));
  EXPECT_THAT(over.status().message(),
              HasSubstr("the byte limit of allocator limited (1048576 bytes)"));
  EXPECT_EQ(limited.allocator()->GetStats().num_allocs, 0);
  // Under it, merged is made.
  auto under = Stitch(&limited, {Ints({1}), Ints({9999})}, {Floats({1}, {1}), Floats({2}, {1})});
  ASSERT_TRUE(under.ok()) << under.status();
  EXPECT_EQ(under->shape(), (TensorShape{10000}));
  EXPECT_EQ(under->data<float>()[9999], 2.0f);
  EXPECT_EQ(under->data<float>()[5000], 0.0f);
}

// DynamicStitch(DynamicPartition(positions, p), DynamicPartition(data, p))
// gives data back: the DynamicPartition gradient's construction.
TEST(DynamicPartitionStitchTest, RoundTripRestoresTheData) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(7);
  for (const auto& [shape, prefix] : std::vector<std::pair<TensorShape, int>>{
           {{12}, 1}, {{6, 3}, 1}, {{4, 3, 2}, 2}, {{2, 2, 2, 2}, 3}, {{5, 0}, 1}, {{0, 4}, 1}}) {
    SCOPED_TRACE(shape.DebugString());
    std::vector<int64_t> pdims(shape.dim_sizes().begin(), shape.dim_sizes().begin() + prefix);
    const TensorShape pshape = *TensorShape::FromDims(pdims);
    Tensor partitions(DT_INT32, pshape), positions(DT_INT32, pshape);
    std::uniform_int_distribution<int32_t> part(0, 3);
    for (int64_t i = 0; i < pshape.num_elements(); ++i) {
      partitions.data<int32_t>()[i] = part(rng);
      positions.data<int32_t>()[i] = static_cast<int32_t>(i);
    }
    Tensor data(DT_DOUBLE, shape);
    for (int64_t i = 0; i < shape.num_elements(); ++i)
      data.data<double>()[i] = 0.5 * static_cast<double>(i) - 3;
    auto parts = Partition(&dev, data, partitions, 4);
    auto where = Partition(&dev, positions, partitions, 4);
    ASSERT_TRUE(parts.ok() && where.ok()) << parts.status() << where.status();
    auto merged = Stitch(&dev, *where, *parts);
    ASSERT_TRUE(merged.ok()) << merged.status();
    auto back = merged->Reshaped(shape);
    ASSERT_TRUE(back.ok()) << back.status() << " from " << merged->shape().DebugString();
    EXPECT_EQ(Values<double>(*back), Values<double>(data));
  }
}

}  // namespace
}  // namespace strata
