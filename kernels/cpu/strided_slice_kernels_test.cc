// StridedSlice and StridedSliceGrad against a reference that follows
// Python's slice rules element by element (loops, not the plan's formulas),
// on random specs with every mask; hand-checked cases; errors; shapes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/strided_slice.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

struct Spec {
  std::vector<int64_t> begin, end, strides;
  StridedSliceMasks m;
};

std::map<std::string, AttrValue> Attrs(const StridedSliceMasks& m) {
  return {{"begin_mask", MakeAttr(m.begin_mask)},
          {"end_mask", MakeAttr(m.end_mask)},
          {"ellipsis_mask", MakeAttr(m.ellipsis_mask)},
          {"new_axis_mask", MakeAttr(m.new_axis_mask)},
          {"shrink_axis_mask", MakeAttr(m.shrink_axis_mask)}};
}

bool Bit(int64_t mask, size_t i) { return ((mask >> i) & 1) != 0; }

// Python's slice of range(dim): the indices x[b:e:s] visits.
std::vector<int64_t> PySlice(int64_t dim, int64_t b, int64_t e, int64_t s, bool b_masked, bool e_masked) {
  int64_t start, stop;
  if (s > 0) {
    start = b_masked ? 0 : (b < 0 ? std::max<int64_t>(b + dim, 0) : std::min(b, dim));
    stop = e_masked ? dim : (e < 0 ? std::max<int64_t>(e + dim, 0) : std::min(e, dim));
  } else {
    start = b_masked ? dim - 1 : (b < 0 ? std::max<int64_t>(b + dim, -1) : std::min(b, dim - 1));
    stop = e_masked ? -1 : (e < 0 ? std::max<int64_t>(e + dim, -1) : std::min(e, dim - 1));
  }
  std::vector<int64_t> v;
  for (int64_t i = start; s > 0 ? i < stop : i > stop; i += s) v.push_back(i);
  return v;
}

// The reference: per input dim, the list of indices taken; the output shape.
struct RefPlan {
  std::vector<std::vector<int64_t>> taken;
  std::vector<int64_t> out_dims;
};

RefPlan Reference(const std::vector<int64_t>& dims, const Spec& sp) {
  RefPlan r;
  size_t named = 0;
  for (size_t i = 0; i < sp.begin.size(); ++i) {
    if (!Bit(sp.m.ellipsis_mask, i) && !Bit(sp.m.new_axis_mask, i)) ++named;
  }
  auto whole = [&](int64_t dim) {
    std::vector<int64_t> all;
    for (int64_t k = 0; k < dim; ++k) all.push_back(k);
    r.taken.push_back(all);
    r.out_dims.push_back(dim);
  };
  size_t d = 0;
  for (size_t i = 0; i < sp.begin.size(); ++i) {
    if (Bit(sp.m.ellipsis_mask, i)) {
      for (size_t k = 0; k < dims.size() - named; ++k) whole(dims[d++]);
    } else if (Bit(sp.m.new_axis_mask, i)) {
      r.out_dims.push_back(1);
    } else if (Bit(sp.m.shrink_axis_mask, i)) {
      r.taken.push_back({sp.begin[i] < 0 ? sp.begin[i] + dims[d] : sp.begin[i]});
      ++d;
    } else {
      r.taken.push_back(PySlice(dims[d], sp.begin[i], sp.end[i], sp.strides[i], Bit(sp.m.begin_mask, i),
                                Bit(sp.m.end_mask, i)));
      r.out_dims.push_back(static_cast<int64_t>(r.taken.back().size()));
      ++d;
    }
  }
  while (d < dims.size()) whole(dims[d++]);
  return r;
}

// x's elements at the reference's indices, row-major.
std::vector<float> Gather(const Tensor& x, const RefPlan& r) {
  std::vector<float> out;
  const int rank = x.dims();
  std::vector<size_t> pos(rank, 0);
  for (const auto& t : r.taken) {
    if (t.empty()) return out;
  }
  while (true) {
    int64_t flat = 0;
    for (int k = 0; k < rank; ++k) flat = flat * x.dim_size(k) + r.taken[k][pos[k]];
    out.push_back(x.data<float>()[flat]);
    int k = rank - 1;
    for (; k >= 0; --k) {
      if (++pos[k] < r.taken[k].size()) break;
      pos[k] = 0;
    }
    if (k < 0) return out;
  }
}

Tensor Ints(const std::vector<int64_t>& v) {
  std::vector<int32_t> w(v.begin(), v.end());
  return Tensor::FromVector<int32_t>(w);
}

Tensor Iota(const TensorShape& shape) {
  Tensor t(DT_FLOAT, shape);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<float>()[i] = static_cast<float>(i + 1);
  return t;
}

absl::StatusOr<Tensor> Slice(DeviceBase* dev, const Tensor& x, const Spec& sp) {
  auto out = RunKernel(dev, "StridedSlice", {x, Ints(sp.begin), Ints(sp.end), Ints(sp.strides)}, Attrs(sp.m));
  if (!out.ok()) return out.status();
  return (*out)[0];
}

std::vector<float> Values(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements()); }

std::string SpecString(const std::vector<int64_t>& dims, const Spec& sp) {
  return absl::StrCat("x[", absl::StrJoin(dims, ","), "] begin ", absl::StrJoin(sp.begin, ","), " end ",
                      absl::StrJoin(sp.end, ","), " strides ", absl::StrJoin(sp.strides, ","), " masks ",
                      sp.m.begin_mask, "/", sp.m.end_mask, "/", sp.m.ellipsis_mask, "/", sp.m.new_axis_mask, "/",
                      sp.m.shrink_axis_mask);
}

// A random valid spec for `dims`: up to rank + 2 entries, any masks, at most
// one ellipsis, shrink indices inside their dim.
Spec RandomSpec(const std::vector<int64_t>& dims, std::mt19937* rng) {
  Spec sp;
  const int rank = static_cast<int>(dims.size());
  const bool ellipsis = (*rng)() % 3 == 0;
  const int named = static_cast<int>((*rng)() % (rank + 1));
  const int new_axes = static_cast<int>((*rng)() % 3);
  std::vector<char> kinds(named, 'n');
  kinds.insert(kinds.end(), new_axes, 'a');
  if (ellipsis) kinds.push_back('e');
  std::shuffle(kinds.begin(), kinds.end(), *rng);
  int d = 0;
  const int span = rank - named;
  for (size_t i = 0; i < kinds.size(); ++i) {
    std::uniform_int_distribution<int64_t> v(-9, 9);
    int64_t b = v(*rng), e = v(*rng), s = v(*rng);
    if (s == 0) s = 1;
    if (kinds[i] == 'e') {
      sp.m.ellipsis_mask |= int64_t{1} << i;
      d += span;
    } else if (kinds[i] == 'a') {
      sp.m.new_axis_mask |= int64_t{1} << i;
    } else {
      const int64_t dim = dims[d++];
      if (dim > 0 && (*rng)() % 4 == 0) {
        sp.m.shrink_axis_mask |= int64_t{1} << i;
        b = static_cast<int64_t>((*rng)() % (2 * dim)) - dim;
        s = 1;
      }
      if ((*rng)() % 4 == 0) sp.m.begin_mask |= int64_t{1} << i;
      if ((*rng)() % 4 == 0) sp.m.end_mask |= int64_t{1} << i;
    }
    sp.begin.push_back(b);
    sp.end.push_back(e);
    sp.strides.push_back(s);
  }
  return sp;
}

TEST(StridedSliceTest, MatchesPythonSlicingOnRandomSpecs) {
  StandaloneCpuDevice dev(4);
  std::mt19937 rng(11);
  for (int t = 0; t < 400; ++t) {
    const int rank = static_cast<int>(rng() % 5);
    std::vector<int64_t> dims;
    for (int i = 0; i < rank; ++i) dims.push_back(static_cast<int64_t>(rng() % 6));
    const Spec sp = RandomSpec(dims, &rng);
    SCOPED_TRACE(SpecString(dims, sp));
    const Tensor x = Iota(*TensorShape::FromDims(dims));
    const RefPlan ref = Reference(dims, sp);
    auto got = Slice(&dev, x, sp);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->shape().dim_sizes(), ref.out_dims);
    EXPECT_EQ(Values(*got), Gather(x, ref));

    // The gradient scatters dy back to the taken positions, zeros elsewhere.
    Tensor dy = Iota(got->shape());
    std::vector<int32_t> shape(dims.begin(), dims.end());
    auto dx = RunKernel(&dev, "StridedSliceGrad",
                        {Tensor::FromVector<int32_t>(shape), Ints(sp.begin), Ints(sp.end), Ints(sp.strides), dy},
                        Attrs(sp.m));
    ASSERT_TRUE(dx.ok()) << dx.status();
    ASSERT_EQ((*dx)[0].shape(), x.shape());
    // Sliced back, dx gives dy; and its sum is dy's (nothing else was written).
    auto back = Slice(&dev, (*dx)[0], sp);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(Values(*back), Values(dy));
    double sum_dx = 0, sum_dy = 0;
    for (float f : Values((*dx)[0])) sum_dx += f;
    for (float f : Values(dy)) sum_dy += f;
    EXPECT_EQ(sum_dx, sum_dy);
  }
}

TEST(StridedSliceTest, HandCheckedCases) {
  StandaloneCpuDevice dev;
  const Tensor x = Iota(TensorShape{3, 4});  // rows 1..4, 5..8, 9..12
  // x[1:, ::-2]
  auto a = Slice(&dev, x, {{1, 0}, {0, 0}, {1, -2}, {.begin_mask = 2, .end_mask = 3}});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shape(), TensorShape({2, 2}));
  EXPECT_EQ(Values(*a), (std::vector<float>{8, 6, 12, 10}));
  // x[..., -1]
  auto b = Slice(&dev, x, {{0, -1}, {0, 0}, {1, 1}, {.ellipsis_mask = 1, .shrink_axis_mask = 2}});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->shape(), TensorShape({3}));
  EXPECT_EQ(Values(*b), (std::vector<float>{4, 8, 12}));
  // x[tf.newaxis, 2, 1:3]
  auto c = Slice(&dev, x, {{0, 2, 1}, {0, 3, 3}, {1, 1, 1}, {.new_axis_mask = 1, .shrink_axis_mask = 2}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->shape(), TensorShape({1, 2}));
  EXPECT_EQ(Values(*c), (std::vector<float>{10, 11}));
  // x[:, :] takes everything: the input's buffer, not a copy.
  auto d = Slice(&dev, x, {{0, 0}, {3, 4}, {1, 1}, {}});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->SharesBufferWith(x));
  // Keras's Flatten: Shape(x)[0] as a scalar (int32 data).
  auto e = RunKernel(&dev, "StridedSlice",
                     {Tensor::FromVector<int32_t>({7, 4, 4}), Ints({0}), Ints({1}), Ints({1})},
                     Attrs({.shrink_axis_mask = 1}));
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)[0].dims(), 0);
  EXPECT_EQ(*(*e)[0].data<int32_t>(), 7);
}

TEST(StridedSliceTest, BadSpecsAreErrorsNamingTheEntry) {
  StandaloneCpuDevice dev;
  const Tensor x = Iota(TensorShape{3, 4});
  EXPECT_THAT(Slice(&dev, x, {{0, 0}, {3, 4}, {1, 0}, {}}).status().message(), HasSubstr("strides[1] is 0"));
  EXPECT_THAT(Slice(&dev, x, {{0, 4}, {0, 0}, {1, 1}, {.shrink_axis_mask = 2}}).status().message(),
              HasSubstr("begin[1] = 4 is out of bounds for dim 1 of size 4"));
  EXPECT_THAT(Slice(&dev, x, {{-4}, {0}, {1}, {.shrink_axis_mask = 1}}).status().message(),
              HasSubstr("out of bounds"));
  EXPECT_THAT(Slice(&dev, x, {{0, 0}, {0, 0}, {1, 1}, {.ellipsis_mask = 3}}).status().message(),
              HasSubstr("more than one ellipsis"));
  EXPECT_THAT(Slice(&dev, x, {{0, 0, 0}, {1, 1, 1}, {1, 1, 1}, {}}).status().message(),
              HasSubstr("indexes 3 dims of an input of rank 2"));
  EXPECT_THAT(RunKernel(&dev, "StridedSlice", {x, Ints({0, 0}), Ints({1}), Ints({1, 1})}, Attrs({})).status().message(),
              HasSubstr("must agree"));
  EXPECT_THAT(RunKernel(&dev, "StridedSliceGrad",
                        {Tensor::FromVector<int32_t>({3, 4}), Ints({0}), Ints({2}), Ints({1}), Iota(TensorShape{3, 4})},
                        Attrs({}))
                  .status()
                  .message(),
              HasSubstr("dy has shape [3,4]"));
}

TEST(StridedSliceTest, ShapeFunction) {
  Scope s = Scope::NewRootScope();
  Output x = ops::Placeholder(s, DT_FLOAT, PartialTensorShape({-1, 8, 5}));
  auto c = [&](std::vector<int32_t> v) { return ops::Const<int32_t>(s, v, TensorShape{static_cast<int64_t>(v.size())}); };
  // x[:, 1:7:2, -1]
  EXPECT_EQ(ops::StridedSlice(s, x, c({0, 1, -1}), c({0, 7, 0}), c({1, 2, 1}),
                              {.begin_mask = 1, .end_mask = 1, .shrink_axis_mask = 4})
                .shape(),
            PartialTensorShape({-1, 3}));
  // x[..., tf.newaxis]
  EXPECT_EQ(ops::StridedSlice(s, x, c({0, 0}), c({0, 0}), c({1, 1}), {.ellipsis_mask = 1, .new_axis_mask = 2}).shape(),
            PartialTensorShape({-1, 8, 5, 1}));
  // Unknown begin: the rank still follows from the masks.
  Output begin = ops::Placeholder(s, DT_INT32, PartialTensorShape({2}));
  EXPECT_EQ(ops::StridedSlice(s, x, begin, c({0, 0}), c({1, 1}), {.shrink_axis_mask = 1}).shape(),
            PartialTensorShape({-1, -1}));
  EXPECT_TRUE(s.ok()) << s.status();
  ops::StridedSlice(s.WithOpName("bad_ss"), x, c({0, 9}), c({0, 0}), c({1, 1}), {.shrink_axis_mask = 2});
  EXPECT_THAT(s.status().message(), HasSubstr("bad_ss"));
  EXPECT_THAT(s.status().message(), HasSubstr("out of bounds"));
}

}  // namespace
}  // namespace strata
