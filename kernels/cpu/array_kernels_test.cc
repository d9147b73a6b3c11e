// Array kernels against plain reference implementations (multi-index loops)
// on random inputs (the shape functions' own tests: graph/ops/array_ops_shape_test.cc).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "graph/ops/array_ops.h"
#include "graph/ops/core_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

// ---- Helpers ----------------------------------------------------------------

std::vector<int64_t> Unflatten(int64_t flat, absl::Span<const int64_t> dims) {
  std::vector<int64_t> idx(dims.size());
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    idx[i] = flat % dims[i];
    flat /= dims[i];
  }
  return idx;
}

int64_t Flatten(absl::Span<const int64_t> idx, absl::Span<const int64_t> dims) {
  int64_t flat = 0;
  for (size_t i = 0; i < dims.size(); ++i) flat = flat * dims[i] + idx[i];
  return flat;
}

template <typename T>
Tensor RandomTensor(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  std::uniform_int_distribution<int> d(-100, 100);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<T>()[i] = static_cast<T>(d(*rng));
  return t;
}

TensorShape RandomShape(int rank, int max_dim, std::mt19937* rng) {
  std::uniform_int_distribution<int> d(0, max_dim);
  std::vector<int64_t> dims(rank);
  for (auto& x : dims) x = d(*rng);
  return *TensorShape::FromDims(dims);
}

Tensor Ints(std::vector<int32_t> v) { return Tensor::FromVector<int32_t>(v); }
Tensor Int64s(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v); }

void ExpectSameTensor(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.dtype(), want.dtype());
  ASSERT_EQ(got.shape(), want.shape()) << got.shape().DebugString() << " vs "
                                       << want.shape().DebugString();
  ASSERT_EQ(0, got.TotalBytes() == 0 ? 0 : std::memcmp(got.raw_data(), want.raw_data(), got.TotalBytes()))
      << got.DebugString() << "\nvs\n" << want.DebugString();
}

Tensor RunOne(DeviceBase* dev, const std::string& op, const std::vector<Tensor>& in,
              const std::map<std::string, AttrValue>& attrs = {}) {
  auto out = RunKernel(dev, op, in, attrs);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? (*out)[0] : Tensor();
}

absl::Status RunStatus(DeviceBase* dev, const std::string& op, const std::vector<Tensor>& in,
                       const std::map<std::string, AttrValue>& attrs = {}) {
  return RunKernel(dev, op, in, attrs).status();
}

// ---- References -------------------------------------------------------------

template <typename T>
Tensor RefTranspose(const Tensor& in, const std::vector<int>& perm) {
  std::vector<int64_t> out_dims(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) out_dims[k] = in.dim_size(perm[k]);
  Tensor out(in.dtype(), *TensorShape::FromDims(out_dims));
  for (int64_t o = 0; o < out.NumElements(); ++o) {
    std::vector<int64_t> oi = Unflatten(o, out_dims), ii(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) ii[perm[k]] = oi[k];
    out.data<T>()[o] = in.data<T>()[Flatten(ii, in.shape().dim_sizes())];
  }
  return out;
}

template <typename T>
Tensor RefConcat(const std::vector<Tensor>& ins, int axis) {
  std::vector<int64_t> dims(ins[0].shape().dim_sizes().begin(), ins[0].shape().dim_sizes().end());
  dims[axis] = 0;
  for (const auto& t : ins) dims[axis] += t.dim_size(axis);
  Tensor out(ins[0].dtype(), *TensorShape::FromDims(dims));
  for (int64_t o = 0; o < out.NumElements(); ++o) {
    std::vector<int64_t> idx = Unflatten(o, dims);
    size_t k = 0;
    while (idx[axis] >= ins[k].dim_size(axis)) idx[axis] -= ins[k++].dim_size(axis);
    out.data<T>()[o] = ins[k].data<T>()[Flatten(idx, ins[k].shape().dim_sizes())];
  }
  return out;
}

template <typename T>
Tensor RefSlice(const Tensor& in, const std::vector<int64_t>& begin,
                const std::vector<int64_t>& size) {
  std::vector<int64_t> dims(size);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) dims[i] = in.dim_size(i) - begin[i];
  }
  Tensor out(in.dtype(), *TensorShape::FromDims(dims));
  for (int64_t o = 0; o < out.NumElements(); ++o) {
    std::vector<int64_t> idx = Unflatten(o, dims);
    for (size_t i = 0; i < idx.size(); ++i) idx[i] += begin[i];
    out.data<T>()[o] = in.data<T>()[Flatten(idx, in.shape().dim_sizes())];
  }
  return out;
}

template <typename T>
Tensor RefPack(const std::vector<Tensor>& ins, int axis) {
  std::vector<int64_t> dims(ins[0].shape().dim_sizes().begin(), ins[0].shape().dim_sizes().end());
  dims.insert(dims.begin() + axis, static_cast<int64_t>(ins.size()));
  Tensor out(ins[0].dtype(), *TensorShape::FromDims(dims));
  for (int64_t o = 0; o < out.NumElements(); ++o) {
    std::vector<int64_t> idx = Unflatten(o, dims);
    const int64_t k = idx[axis];
    idx.erase(idx.begin() + axis);
    out.data<T>()[o] = ins[k].data<T>()[Flatten(idx, ins[k].shape().dim_sizes())];
  }
  return out;
}

// ---- Reshape ----------------------------------------------------------------

TEST(ReshapeTest, SharesBufferAndInfersMinusOne) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(1);
  Tensor x = RandomTensor<float>(TensorShape{4, 6}, &rng);
  Tensor y = RunOne(&dev, "Reshape", {x, Ints({3, -1, 2})});
  EXPECT_EQ(y.shape(), (TensorShape{3, 4, 2}));
  EXPECT_TRUE(y.SharesBufferWith(x));
  Tensor z = RunOne(&dev, "Reshape", {x, Int64s({24})});
  EXPECT_EQ(z.shape(), TensorShape{24});
  // Scalar <-> [1], and empty tensors.
  Tensor s = RunOne(&dev, "Reshape", {Tensor::Scalar<int32_t>(5), Ints({1, 1})});
  EXPECT_EQ(s.shape(), (TensorShape{1, 1}));
  Tensor back = RunOne(&dev, "Reshape", {s, Tensor(DT_INT32, TensorShape{0})});
  EXPECT_EQ(back.shape(), TensorShape{});
  EXPECT_EQ(*back.data<int32_t>(), 5);
  Tensor e = RunOne(&dev, "Reshape", {Tensor(DT_FLOAT, TensorShape{0, 3}), Ints({3, -1})});
  EXPECT_EQ(e.shape(), (TensorShape{3, 0}));
}

TEST(ReshapeTest, BadShapesAreErrors) {
  StandaloneCpuDevice dev;
  Tensor x(DT_FLOAT, TensorShape{2, 3});
  absl::Status s = RunStatus(&dev, "Reshape", {x, Ints({4, 2})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[2,3]"));
  EXPECT_THAT(s.message(), HasSubstr("[4,2]"));
  EXPECT_THAT(RunStatus(&dev, "Reshape", {x, Ints({-1, -1})}).message(), HasSubstr("more than one"));
  EXPECT_THAT(RunStatus(&dev, "Reshape", {x, Ints({-2, -3})}).message(), HasSubstr("negative"));
  EXPECT_THAT(RunStatus(&dev, "Reshape", {x, Ints({4, -1})}).message(), HasSubstr("cannot reshape"));
  EXPECT_FALSE(RunStatus(&dev, "Reshape", {Tensor(DT_FLOAT, TensorShape{0}), Ints({0, -1})}).ok());
  EXPECT_FALSE(RunStatus(&dev, "Reshape", {x, Tensor(DT_INT32, TensorShape{1, 2})}).ok());
  // Known dims whose product overflows int64.
  EXPECT_THAT(RunStatus(&dev, "Reshape", {x, Int64s({int64_t{1} << 62, 8, -1})}).message(),
              HasSubstr("2^63-1"));
}

// ---- Transpose --------------------------------------------------------------

template <typename T>
void CheckRandomTransposes(DeviceBase* dev, std::mt19937* rng, int trials) {
  for (int t = 0; t < trials; ++t) {
    const int rank = static_cast<int>((*rng)() % 6);
    TensorShape shape = RandomShape(rank, 7, rng);
    Tensor x = RandomTensor<T>(shape, rng);
    std::vector<int> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), *rng);
    std::vector<int32_t> perm_arg(perm.begin(), perm.end());
    // Half the time spell entries from the end (-1 is the last dim).
    if (t % 2 == 1) {
      for (auto& p : perm_arg) p -= rank;
    }
    SCOPED_TRACE(absl::StrCat(shape.DebugString(), " perm ", absl::StrJoin(perm, ",")));
    ExpectSameTensor(RunOne(dev, "Transpose", {x, Ints(perm_arg)}), RefTranspose<T>(x, perm));
  }
}

TEST(ExpandDimsSqueezeTest, ReshapeTheBufferAsTensorFlowDoes) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(1);
  Tensor x = RandomTensor<float>(TensorShape{2, 3}, &rng);
  EXPECT_EQ(RunOne(&dev, "ExpandDims", {x, Ints({0})}).shape(), (TensorShape{1, 2, 3}));
  EXPECT_EQ(RunOne(&dev, "ExpandDims", {x, Ints({-1})}).shape(), (TensorShape{2, 3, 1}));
  Tensor mid = RunOne(&dev, "ExpandDims", {x, Int64s({1})});
  EXPECT_EQ(mid.shape(), (TensorShape{2, 1, 3}));
  EXPECT_TRUE(mid.SharesBufferWith(x));
  EXPECT_EQ(RunOne(&dev, "ExpandDims", {Tensor::Scalar<float>(2), Ints({0})}).shape(), TensorShape{1});
  Tensor y = RandomTensor<float>(TensorShape{1, 2, 1, 3, 1}, &rng);
  EXPECT_EQ(RunOne(&dev, "Squeeze", {y}).shape(), (TensorShape{2, 3}));
  Tensor some = RunOne(&dev, "Squeeze", {y}, {{"squeeze_dims", MakeAttr(std::vector<int64_t>{0, -1})}});
  EXPECT_EQ(some.shape(), (TensorShape{2, 1, 3}));
  EXPECT_TRUE(some.SharesBufferWith(y));
  // Out of range, or not of size 1: errors naming the dim and the shape.
  EXPECT_THAT(RunStatus(&dev, "ExpandDims", {x, Ints({3})}).message(), HasSubstr("outside [-3, 2]"));
  EXPECT_THAT(RunStatus(&dev, "ExpandDims", {x, Ints({0, 1})}).message(), HasSubstr("one value"));
  absl::Status s = RunStatus(&dev, "Squeeze", {y}, {{"squeeze_dims", MakeAttr(std::vector<int64_t>{1})}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("has size 2, not 1"));
  EXPECT_THAT(RunStatus(&dev, "Squeeze", {y}, {{"squeeze_dims", MakeAttr(std::vector<int64_t>{5})}}).message(),
              HasSubstr("outside [-5, 5)"));
}

TEST(GatherTest, RowsAtIndicesAlongAnyAxisAndBadIndicesNamed) {
  StandaloneCpuDevice dev;
  Tensor p(DT_FLOAT, TensorShape{3, 2});
  for (int i = 0; i < 6; ++i) p.data<float>()[i] = static_cast<float>(i);  // rows (0 1) (2 3) (4 5)
  Tensor g = RunOne(&dev, "GatherV2", {p, Ints({2, 0, 2}), Ints({0})});
  ASSERT_EQ(g.shape(), (TensorShape{3, 2}));
  EXPECT_EQ(std::vector<float>(g.data<float>(), g.data<float>() + 6), (std::vector<float>{4, 5, 0, 1, 4, 5}));
  Tensor cols = RunOne(&dev, "GatherV2", {p, Int64s({1}), Ints({1})});
  ASSERT_EQ(cols.shape(), (TensorShape{3, 1}));
  EXPECT_EQ(std::vector<float>(cols.data<float>(), cols.data<float>() + 3), (std::vector<float>{1, 3, 5}));
  EXPECT_THAT(RunStatus(&dev, "GatherV2", {p, Ints({0, 3}), Ints({0})}).message(),
              HasSubstr("indices[1] = 3 is not in [0, 3)"));
  EXPECT_THAT(RunStatus(&dev, "GatherV2", {p, Ints({-1}), Ints({0})}).message(), HasSubstr("indices[0] = -1"));
  EXPECT_THAT(RunStatus(&dev, "GatherV2", {p, Ints({0}), Ints({2})}).message(), HasSubstr("axis 2 is outside"));
}

TEST(UnsortedSegmentSumTest, AddsRowsIntoTheirSegments) {
  StandaloneCpuDevice dev;
  Tensor d(DT_FLOAT, TensorShape{4, 2});
  for (int i = 0; i < 8; ++i) d.data<float>()[i] = static_cast<float>(i + 1);  // (1 2) (3 4) (5 6) (7 8)
  Tensor out = RunOne(&dev, "UnsortedSegmentSum", {d, Ints({2, 0, 2, 0}), Ints({3})});
  ASSERT_EQ(out.shape(), (TensorShape{3, 2}));
  EXPECT_EQ(std::vector<float>(out.data<float>(), out.data<float>() + 6),
            (std::vector<float>{3 + 7, 4 + 8, 0, 0, 1 + 5, 2 + 6}));
  EXPECT_THAT(RunStatus(&dev, "UnsortedSegmentSum", {d, Ints({0, 1, 3, 0}), Ints({3})}).message(),
              HasSubstr("segment_ids[2] = 3 is not in [0, 3)"));
  EXPECT_THAT(RunStatus(&dev, "UnsortedSegmentSum", {d, Ints({0, 1}), Ints({3})}).message(),
              HasSubstr("not a prefix"));
}

TEST(TransposeTest, MatchesReferenceForEveryElementSize) {
  StandaloneCpuDevice dev(4);
  std::mt19937 rng(2);
  CheckRandomTransposes<float>(&dev, &rng, 60);
  CheckRandomTransposes<double>(&dev, &rng, 30);
  CheckRandomTransposes<int64_t>(&dev, &rng, 30);
  CheckRandomTransposes<int16_t>(&dev, &rng, 30);
  CheckRandomTransposes<uint8_t>(&dev, &rng, 30);
}

TEST(TransposeTest, LargeTiledAndRunCopies) {
  StandaloneCpuDevice dev(4);
  std::mt19937 rng(3);
  // A 2-D transpose wider than a tile, with ragged edges.
  Tensor m = RandomTensor<float>(TensorShape{301, 257}, &rng);
  ExpectSameTensor(RunOne(&dev, "Transpose", {m, Ints({1, 0})}), RefTranspose<float>(m, {1, 0}));
  // NHWC -> NCHW (tiled after merging H and W) and a run-copy permutation.
  Tensor x = RandomTensor<int32_t>(TensorShape{3, 17, 19, 40}, &rng);
  ExpectSameTensor(RunOne(&dev, "Transpose", {x, Ints({0, 3, 1, 2})}),
                   RefTranspose<int32_t>(x, {0, 3, 1, 2}));
  ExpectSameTensor(RunOne(&dev, "Transpose", {x, Ints({2, 0, 1, 3})}),
                   RefTranspose<int32_t>(x, {2, 0, 1, 3}));
}

TEST(TransposeTest, IdentityAndSizeOneMovesShareTheBuffer) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(4);
  Tensor x = RandomTensor<float>(TensorShape{5, 1, 7}, &rng);
  Tensor same = RunOne(&dev, "Transpose", {x, Ints({0, 1, 2})});
  EXPECT_TRUE(same.SharesBufferWith(x));
  Tensor moved = RunOne(&dev, "Transpose", {x, Ints({1, 0, 2})});
  EXPECT_TRUE(moved.SharesBufferWith(x));
  EXPECT_EQ(moved.shape(), (TensorShape{1, 5, 7}));
  Tensor scalar = RunOne(&dev, "Transpose", {Tensor::Scalar<float>(2.f), Tensor(DT_INT32, TensorShape{0})});
  EXPECT_EQ(*scalar.data<float>(), 2.f);
}

TEST(TransposeTest, BadPermIsAnError) {
  StandaloneCpuDevice dev;
  Tensor x(DT_FLOAT, TensorShape{2, 3});
  EXPECT_THAT(RunStatus(&dev, "Transpose", {x, Ints({0, 0})}).message(), HasSubstr("twice"));
  EXPECT_THAT(RunStatus(&dev, "Transpose", {x, Ints({0, 1, 2})}).message(), HasSubstr("rank"));
  EXPECT_THAT(RunStatus(&dev, "Transpose", {x, Ints({0, 2})}).message(), HasSubstr("out of range"));
  EXPECT_FALSE(RunStatus(&dev, "Transpose", {x, Ints({-3, 0})}).ok());
}

// ---- ConcatV2 and Pack ------------------------------------------------------

absl::StatusOr<std::vector<Tensor>> RunConcat(DeviceBase* dev, const std::vector<Tensor>& values,
                                              Tensor axis) {
  return RunKernelWithListInputs(dev, "ConcatV2", {values, {axis}});
}

TEST(ConcatV2Test, MatchesReference) {
  StandaloneCpuDevice dev(4);
  std::mt19937 rng(5);
  for (int t = 0; t < 80; ++t) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    const int axis = static_cast<int>(rng() % rank);
    const int n = 2 + static_cast<int>(rng() % 3);
    TensorShape base = RandomShape(rank, 6, &rng);
    std::vector<Tensor> values;
    for (int k = 0; k < n; ++k) {
      std::vector<int64_t> dims(base.dim_sizes().begin(), base.dim_sizes().end());
      dims[axis] = rng() % 5;  // sometimes 0: an empty input
      values.push_back(RandomTensor<float>(*TensorShape::FromDims(dims), &rng));
    }
    // Axis given from the end half the time, as int64 a third of the time.
    const int64_t spelled = t % 2 ? axis - rank : axis;
    Tensor axis_t = t % 3 ? Tensor::Scalar<int32_t>(static_cast<int32_t>(spelled))
                          : Tensor::Scalar<int64_t>(spelled);
    SCOPED_TRACE(absl::StrCat(base.DebugString(), " axis ", spelled));
    auto out = RunConcat(&dev, values, axis_t);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectSameTensor((*out)[0], RefConcat<float>(values, axis));
  }
  // A large concat along the inner axis, split over threads by rows.
  std::vector<Tensor> big = {RandomTensor<int64_t>(TensorShape{5000, 7}, &rng),
                             RandomTensor<int64_t>(TensorShape{5000, 13}, &rng)};
  auto out = RunConcat(&dev, big, Tensor::Scalar<int32_t>(1));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectSameTensor((*out)[0], RefConcat<int64_t>(big, 1));
}

TEST(ConcatV2Test, BadShapesAreErrors) {
  StandaloneCpuDevice dev;
  Tensor a(DT_FLOAT, TensorShape{2, 3}), b(DT_FLOAT, TensorShape{2, 4}), c(DT_FLOAT, TensorShape{2});
  EXPECT_THAT(RunConcat(&dev, {a, b}, Tensor::Scalar<int32_t>(0)).status().message(),
              HasSubstr("dimension 1"));
  EXPECT_TRUE(RunConcat(&dev, {a, b}, Tensor::Scalar<int32_t>(1)).ok());
  EXPECT_THAT(RunConcat(&dev, {a, c}, Tensor::Scalar<int32_t>(0)).status().message(),
              HasSubstr("same rank"));
  EXPECT_THAT(RunConcat(&dev, {a, a}, Tensor::Scalar<int32_t>(2)).status().message(),
              HasSubstr("out of range"));
  EXPECT_THAT(RunConcat(&dev, {Tensor::Scalar<float>(1), Tensor::Scalar<float>(2)},
                        Tensor::Scalar<int32_t>(0)).status().message(),
              HasSubstr("scalars"));
  EXPECT_FALSE(RunConcat(&dev, {a, a}, Ints({0})).ok());  // axis must be a scalar
}

TEST(PackTest, MatchesReference) {
  StandaloneCpuDevice dev(4);
  std::mt19937 rng(6);
  for (int t = 0; t < 60; ++t) {
    const int rank = static_cast<int>(rng() % 4);
    const int axis = static_cast<int>(rng() % (rank + 1));
    const int n = 1 + static_cast<int>(rng() % 4);
    TensorShape shape = RandomShape(rank, 5, &rng);
    std::vector<Tensor> values;
    for (int k = 0; k < n; ++k) values.push_back(RandomTensor<int32_t>(shape, &rng));
    const int64_t spelled = t % 2 ? axis - (rank + 1) : axis;
    SCOPED_TRACE(absl::StrCat(shape.DebugString(), " axis ", spelled));
    auto out = RunKernelWithListInputs(&dev, "Pack", {values}, {{"axis", MakeAttr(spelled)}});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectSameTensor((*out)[0], RefPack<int32_t>(values, axis));
  }
}

TEST(PackTest, BadInputsAreErrors) {
  StandaloneCpuDevice dev;
  Tensor a(DT_FLOAT, TensorShape{2, 3}), b(DT_FLOAT, TensorShape{3, 2});
  EXPECT_THAT(RunKernelWithListInputs(&dev, "Pack", {{a, b}}).status().message(),
              HasSubstr("one shape"));
  EXPECT_THAT(RunKernelWithListInputs(&dev, "Pack", {{a, a}}, {{"axis", MakeAttr(3)}})
                  .status()
                  .message(),
              HasSubstr("out of range"));
}

// ---- Slice ------------------------------------------------------------------

TEST(SliceTest, MatchesReference) {
  StandaloneCpuDevice dev(4);
  std::mt19937 rng(7);
  for (int t = 0; t < 100; ++t) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    TensorShape shape = RandomShape(rank, 7, &rng);
    Tensor x = RandomTensor<double>(shape, &rng);
    std::vector<int64_t> begin(rank), size(rank);
    for (int i = 0; i < rank; ++i) {
      begin[i] = rng() % (shape.dim_size(i) + 1);
      const int64_t left = shape.dim_size(i) - begin[i];
      size[i] = rng() % 4 == 0 ? -1 : static_cast<int64_t>(rng() % (left + 1));
    }
    SCOPED_TRACE(absl::StrCat(shape.DebugString(), " begin ", absl::StrJoin(begin, ","),
                              " size ", absl::StrJoin(size, ",")));
    ExpectSameTensor(RunOne(&dev, "Slice", {x, Int64s(begin), Int64s(size)}),
                     RefSlice<double>(x, begin, size));
  }
}

TEST(SliceTest, WholeInputSharesBuffer) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(8);
  Tensor x = RandomTensor<float>(TensorShape{3, 4}, &rng);
  EXPECT_TRUE(RunOne(&dev, "Slice", {x, Ints({0, 0}), Ints({-1, 4})}).SharesBufferWith(x));
  Tensor s = RunOne(&dev, "Slice", {Tensor::Scalar<float>(3.f), Ints({}), Ints({})});
  EXPECT_EQ(*s.data<float>(), 3.f);
}

TEST(SliceTest, OutOfBoundsIsAnError) {
  StandaloneCpuDevice dev;
  Tensor x(DT_FLOAT, TensorShape{3, 4});
  EXPECT_THAT(RunStatus(&dev, "Slice", {x, Ints({0, 1}), Ints({2, 4})}).message(),
              HasSubstr("size[1]"));
  EXPECT_THAT(RunStatus(&dev, "Slice", {x, Ints({4, 0}), Ints({0, 1})}).message(),
              HasSubstr("begin[0]"));
  EXPECT_FALSE(RunStatus(&dev, "Slice", {x, Ints({0, -1}), Ints({1, 1})}).ok());
  EXPECT_FALSE(RunStatus(&dev, "Slice", {x, Ints({0, 0}), Ints({-2, 1})}).ok());
  EXPECT_FALSE(RunStatus(&dev, "Slice", {x, Ints({0}), Ints({1})}).ok());
}

// ---- Fill, ZerosLike, OnesLike, Shape ---------------------------------------

TEST(FillTest, FillsEveryElementAndChecksDims) {
  StandaloneCpuDevice dev(4);
  Tensor f = RunOne(&dev, "Fill", {Ints({300, 201}), Tensor::Scalar<double>(2.5)});
  ASSERT_EQ(f.shape(), (TensorShape{300, 201}));
  for (double v : f.span<double>()) ASSERT_EQ(v, 2.5);
  Tensor b = RunOne(&dev, "Fill", {Int64s({3}), Tensor::Scalar<bool>(true)});
  for (bool v : b.span<bool>()) EXPECT_TRUE(v);
  EXPECT_EQ(RunOne(&dev, "Fill", {Ints({2, 0}), Tensor::Scalar<float>(1)}).NumElements(), 0);
  EXPECT_EQ(RunOne(&dev, "Fill", {Ints({}), Tensor::Scalar<int32_t>(7)}).shape(), TensorShape{});

  EXPECT_THAT(RunStatus(&dev, "Fill", {Ints({2, -1}), Tensor::Scalar<float>(1)}).message(),
              HasSubstr("negative"));
  EXPECT_THAT(RunStatus(&dev, "Fill", {Int64s({int64_t{1} << 40, int64_t{1} << 40}),
                                       Tensor::Scalar<float>(1)})
                  .message(),
              HasSubstr("2^63-1"));
  EXPECT_FALSE(RunStatus(&dev, "Fill", {Ints({2}), Tensor::FromVector<float>({1, 2})}).ok());
}

template <typename T>
void CheckZerosOnes(DeviceBase* dev) {
  std::mt19937 rng(9);
  Tensor x = RandomTensor<T>(TensorShape{3, 5}, &rng);
  Tensor z = RunOne(dev, "ZerosLike", {x});
  Tensor o = RunOne(dev, "OnesLike", {x});
  ASSERT_EQ(z.shape(), x.shape());
  ASSERT_EQ(o.shape(), x.shape());
  for (T v : z.span<T>()) EXPECT_EQ(v, T(0));
  for (T v : o.span<T>()) EXPECT_EQ(v, T(1));
}

TEST(ZerosOnesLikeTest, EveryCommonDtype) {
  StandaloneCpuDevice dev;
  CheckZerosOnes<float>(&dev);
  CheckZerosOnes<double>(&dev);
  CheckZerosOnes<int32_t>(&dev);
  CheckZerosOnes<int64_t>(&dev);
  CheckZerosOnes<uint8_t>(&dev);
  CheckZerosOnes<bool>(&dev);
  EXPECT_EQ(RunOne(&dev, "OnesLike", {Tensor(DT_FLOAT, TensorShape{0, 4})}).shape(),
            (TensorShape{0, 4}));
  Tensor h(DT_HALF, TensorShape{2});
  Tensor ho = RunOne(&dev, "OnesLike", {h});
  EXPECT_EQ(ho.data<uint16_t>()[1], 0x3c00);  // 1.0 in IEEE half
}

TEST(ShapeTest, Int32AndInt64) {
  StandaloneCpuDevice dev;
  Tensor x(DT_FLOAT, TensorShape{2, 0, 7});
  Tensor s = RunOne(&dev, "Shape", {x});
  ASSERT_EQ(s.dtype(), DT_INT32);
  EXPECT_EQ(std::vector<int32_t>(s.span<int32_t>().begin(), s.span<int32_t>().end()),
            (std::vector<int32_t>{2, 0, 7}));
  Tensor s64 = RunOne(&dev, "Shape", {x}, {{"out_type", MakeAttr(DT_INT64)}});
  ASSERT_EQ(s64.dtype(), DT_INT64);
  EXPECT_EQ(s64.data<int64_t>()[2], 7);
  EXPECT_EQ(RunOne(&dev, "Shape", {Tensor::Scalar<float>(1)}).shape(), TensorShape{0});
}

// ---- OneHot -----------------------------------------------------------------

TEST(OneHotTest, MatchesReferenceOnEveryAxis) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(10);
  for (int t = 0; t < 40; ++t) {
    const int rank = static_cast<int>(rng() % 3);
    TensorShape shape = RandomShape(rank, 4, &rng);
    const int32_t depth = static_cast<int32_t>(rng() % 5);
    const int64_t axis = static_cast<int64_t>(rng() % (rank + 2)) - 1;  // -1 .. rank
    Tensor idx(DT_INT64, shape);
    for (auto& v : idx.span<int64_t>()) v = static_cast<int64_t>(rng() % (depth + 3)) - 1;
    SCOPED_TRACE(absl::StrCat(shape.DebugString(), " depth ", depth, " axis ", axis));
    Tensor out = RunOne(&dev, "OneHot",
                        {idx, Tensor::Scalar<int32_t>(depth), Tensor::Scalar<float>(5.f),
                         Tensor::Scalar<float>(-1.f)},
                        {{"axis", MakeAttr(axis)}});
    const int a = axis == -1 ? rank : static_cast<int>(axis);
    std::vector<int64_t> dims(shape.dim_sizes().begin(), shape.dim_sizes().end());
    dims.insert(dims.begin() + a, depth);
    ASSERT_EQ(out.shape(), *TensorShape::FromDims(dims));
    for (int64_t o = 0; o < out.NumElements(); ++o) {
      std::vector<int64_t> i = Unflatten(o, dims);
      const int64_t d = i[a];
      i.erase(i.begin() + a);
      const bool hot = idx.data<int64_t>()[Flatten(i, shape.dim_sizes())] == d;
      ASSERT_EQ(out.data<float>()[o], hot ? 5.f : -1.f) << "at " << o;
    }
  }
}

TEST(OneHotTest, IndexTypesAndErrors) {
  StandaloneCpuDevice dev;
  Tensor idx = Tensor::FromVector<uint8_t>({2, 0});
  Tensor out = RunOne(&dev, "OneHot",
                      {idx, Tensor::Scalar<int32_t>(3), Tensor::Scalar<int32_t>(1),
                       Tensor::Scalar<int32_t>(0)});
  EXPECT_EQ(std::vector<int32_t>(out.span<int32_t>().begin(), out.span<int32_t>().end()),
            (std::vector<int32_t>{0, 0, 1, 1, 0, 0}));
  auto on = Tensor::Scalar<float>(1), off = Tensor::Scalar<float>(0);
  EXPECT_THAT(RunStatus(&dev, "OneHot", {Ints({1}), Tensor::Scalar<int32_t>(-1), on, off}).message(),
              HasSubstr("depth"));
  EXPECT_THAT(RunStatus(&dev, "OneHot", {Ints({1}), Tensor::Scalar<int32_t>(2), on, off},
                        {{"axis", MakeAttr(-2)}})
                  .message(),
              HasSubstr("axis"));
  EXPECT_FALSE(RunStatus(&dev, "OneHot", {Ints({1}), Ints({2}), on, off}).ok());
}

// ---- Range, Tile, Split, SplitV ---------------------------------------------

TEST(RangeTest, IntegerAndFloatingRangesAndErrors) {
  StandaloneCpuDevice dev;
  ExpectSameTensor(RunOne(&dev, "Range", {Tensor::Scalar<int32_t>(2), Tensor::Scalar<int32_t>(11),
                                          Tensor::Scalar<int32_t>(3)}),
                   Ints({2, 5, 8}));
  ExpectSameTensor(RunOne(&dev, "Range", {Tensor::Scalar<int64_t>(5), Tensor::Scalar<int64_t>(-1),
                                          Tensor::Scalar<int64_t>(-2)}),
                   Int64s({5, 3, 1}));
  ExpectSameTensor(RunOne(&dev, "Range", {Tensor::Scalar<float>(0.f), Tensor::Scalar<float>(1.f),
                                          Tensor::Scalar<float>(0.25f)}),
                   Tensor::FromVector<float>({0.f, 0.25f, 0.5f, 0.75f}));
  EXPECT_EQ(RunOne(&dev, "Range", {Tensor::Scalar<double>(1.0), Tensor::Scalar<double>(1.0),
                                   Tensor::Scalar<double>(0.5)})
                .NumElements(),
            0);
  EXPECT_THAT(RunStatus(&dev, "Range", {Tensor::Scalar<int32_t>(0), Tensor::Scalar<int32_t>(4),
                                        Tensor::Scalar<int32_t>(0)})
                  .message(),
              HasSubstr("delta must not be 0"));
  EXPECT_THAT(RunStatus(&dev, "Range", {Tensor::Scalar<int32_t>(4), Tensor::Scalar<int32_t>(0),
                                        Tensor::Scalar<int32_t>(1)})
                  .message(),
              HasSubstr("start 4 > limit 0"));
  // Unbounded memory is refused, not attempted.
  EXPECT_THAT(RunStatus(&dev, "Range", {Tensor::Scalar<int64_t>(0), Tensor::Scalar<int64_t>(int64_t{1} << 62),
                                        Tensor::Scalar<int64_t>(1)})
                  .message(),
              HasSubstr("too many"));
  EXPECT_THAT(RunStatus(&dev, "Range", {Tensor::Scalar<float>(0.f), Tensor::Scalar<float>(INFINITY),
                                        Tensor::Scalar<float>(1.f)})
                  .message(),
              HasSubstr("finite"));
  EXPECT_FALSE(RunStatus(&dev, "Range", {Ints({0}), Tensor::Scalar<int32_t>(4), Tensor::Scalar<int32_t>(1)}).ok());
}

template <typename T>
Tensor RefTile(const Tensor& in, const std::vector<int64_t>& m) {
  std::vector<int64_t> dims;
  for (int i = 0; i < in.dims(); ++i) dims.push_back(in.dim_size(i) * m[i]);
  Tensor out(in.dtype(), *TensorShape::FromDims(dims));
  for (int64_t o = 0; o < out.NumElements(); ++o) {
    std::vector<int64_t> idx = Unflatten(o, dims);
    for (int i = 0; i < in.dims(); ++i) idx[i] %= in.dim_size(i);
    out.data<T>()[o] = in.data<T>()[Flatten(idx, in.shape().dim_sizes())];
  }
  return out;
}

TEST(TileTest, MatchesReferenceAndRefusesBadMultiples) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(21);
  for (int t = 0; t < 60; ++t) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    TensorShape shape = RandomShape(rank, 4, &rng);
    std::vector<int64_t> m;
    for (int i = 0; i < rank; ++i) m.push_back(static_cast<int64_t>(rng() % 4));
    Tensor in = RandomTensor<float>(shape, &rng);
    SCOPED_TRACE(absl::StrCat(shape.DebugString(), " x ", absl::StrJoin(m, ",")));
    ExpectSameTensor(RunOne(&dev, "Tile", {in, Int64s(m)}), RefTile<float>(in, m));
    Tensor ints = RandomTensor<int32_t>(shape, &rng);
    ExpectSameTensor(RunOne(&dev, "Tile", {ints, Int64s(m)}), RefTile<int32_t>(ints, m));
  }
  ExpectSameTensor(RunOne(&dev, "Tile", {Tensor::Scalar<float>(2.f), Ints({})}), Tensor::Scalar<float>(2.f));
  Tensor x = RandomTensor<float>(TensorShape{2, 3}, &rng);
  EXPECT_THAT(RunStatus(&dev, "Tile", {x, Ints({2})}).message(), HasSubstr("one entry per dim"));
  EXPECT_THAT(RunStatus(&dev, "Tile", {x, Ints({1, -1})}).message(), HasSubstr("must be >= 0"));
  EXPECT_FALSE(RunStatus(&dev, "Tile", {x, Int64s({int64_t{1} << 62, int64_t{1} << 62})}).ok());
}

TEST(SplitTest, SplitAndSplitVCutAlongEveryAxis) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(22);
  Tensor x = RandomTensor<float>(TensorShape{4, 6, 2}, &rng);
  for (int axis = -3; axis < 3; ++axis) {
    const int a = axis < 0 ? axis + 3 : axis;
    const int64_t d = x.dim_size(a);
    auto out = RunKernel(&dev, "Split", {Tensor::Scalar<int32_t>(axis), x}, {{"num_split", MakeAttr(2)}});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 2u);
    for (int k = 0; k < 2; ++k) {
      std::vector<int64_t> begin(3, 0), size(3, -1);
      begin[a] = k * d / 2;
      size[a] = d / 2;
      ExpectSameTensor((*out)[k], RefSlice<float>(x, begin, size));
    }
    // SplitV with a -1 part: sizes {1, rest}.
    auto v = RunKernel(&dev, "SplitV", {x, Int64s({1, -1}), Tensor::Scalar<int32_t>(axis)},
                       {{"num_split", MakeAttr(2)}});
    ASSERT_TRUE(v.ok()) << v.status();
    std::vector<int64_t> begin(3, 0), size(3, -1);
    size[a] = 1;
    ExpectSameTensor((*v)[0], RefSlice<float>(x, begin, size));
    begin[a] = 1;
    size[a] = -1;
    ExpectSameTensor((*v)[1], RefSlice<float>(x, begin, size));
  }
  // Zero-sized parts and int32 sizes.
  auto z = RunKernel(&dev, "SplitV", {x, Ints({0, 6, 0}), Tensor::Scalar<int32_t>(1)}, {{"num_split", MakeAttr(3)}});
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ((*z)[0].shape(), (TensorShape{4, 0, 2}));
  ExpectSameTensor((*z)[1], x);
  EXPECT_THAT(RunKernel(&dev, "Split", {Tensor::Scalar<int32_t>(1), x}, {{"num_split", MakeAttr(4)}}).status().message(),
              HasSubstr("does not split into 4 equal parts"));
  EXPECT_THAT(RunKernel(&dev, "SplitV", {x, Ints({2, 3}), Tensor::Scalar<int32_t>(1)}, {{"num_split", MakeAttr(2)}})
                  .status()
                  .message(),
              HasSubstr("sum to 5"));
  EXPECT_FALSE(RunKernel(&dev, "SplitV", {x, Ints({-1, -1}), Tensor::Scalar<int32_t>(1)}, {{"num_split", MakeAttr(2)}}).ok());
  EXPECT_FALSE(RunKernel(&dev, "SplitV", {x, Ints({6}), Tensor::Scalar<int32_t>(1)}, {{"num_split", MakeAttr(2)}}).ok());
  EXPECT_FALSE(RunKernel(&dev, "Split", {Tensor::Scalar<int32_t>(3), x}, {{"num_split", MakeAttr(2)}}).ok());
  EXPECT_FALSE(RunKernel(&dev, "Split", {Tensor::Scalar<int32_t>(0), Tensor::Scalar<float>(1.f)},
                         {{"num_split", MakeAttr(1)}})
                   .ok());
}

TEST(MatrixBandPartTest, MatchesReferenceForEveryBand) {
  StandaloneCpuDevice dev(2);
  std::mt19937 rng(12);
  const Tensor x = RandomTensor<float>(TensorShape{2, 4, 5}, &rng);
  for (int64_t lower = -1; lower <= 4; ++lower) {
    for (int64_t upper = -1; upper <= 5; ++upper) {
      SCOPED_TRACE(absl::StrCat("lower ", lower, " upper ", upper));
      Tensor want(DT_FLOAT, x.shape());
      for (int64_t i = 0; i < x.NumElements(); ++i) {
        const int64_t r = (i / 5) % 4, c = i % 5;
        const bool in = (lower < 0 || r - c <= lower) && (upper < 0 || c - r <= upper);
        want.data<float>()[i] = in ? x.data<float>()[i] : 0.f;
      }
      ExpectSameTensor(RunOne(&dev, "MatrixBandPart", {x, Int64s({lower}).Reshaped(TensorShape{}).value(),
                                                       Int64s({upper}).Reshaped(TensorShape{}).value()}),
                       want);
    }
  }
  EXPECT_THAT(RunStatus(&dev, "MatrixBandPart", {x, Tensor::Scalar<int64_t>(5), Tensor::Scalar<int64_t>(0)}).message(),
              HasSubstr("num_lower 5 must be at most 4"));
  EXPECT_THAT(RunStatus(&dev, "MatrixBandPart",
                        {Tensor::FromVector<float>({1.f}), Tensor::Scalar<int64_t>(0), Tensor::Scalar<int64_t>(0)})
                  .message(),
              HasSubstr("at least 2-D"));
}

}  // namespace
}  // namespace strata
