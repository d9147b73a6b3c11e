// BatchMatMulV2 on the CPU against a direct triple loop, over broadcast
// patterns (same batch, one operand shared, partial broadcast, a rank
// difference), every adj combination, one and four threads, and bfloat16.
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/cpu/math_test_util.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

using testing::ExpectTensorNear;
using testing::RandomTensor;

// out[b] = op(x[xb]) op(y[yb]) with numpy broadcasting of the batch dims.
Tensor Reference(const Tensor& x, const Tensor& y, bool ax, bool ay, const TensorShape& out_shape) {
  const int xr = x.dims(), yr = y.dims(), orank = out_shape.dims();
  const int64_t m = out_shape.dim_size(orank - 2), n = out_shape.dim_size(orank - 1);
  const int64_t k = x.dim_size(ax ? xr - 2 : xr - 1);
  const int64_t xrows = x.dim_size(xr - 2), xcols = x.dim_size(xr - 1);
  const int64_t yrows = y.dim_size(yr - 2), ycols = y.dim_size(yr - 1);
  Tensor out(DT_FLOAT, out_shape);
  const int nb = orank - 2;
  int64_t batch = 1;
  for (int i = 0; i < nb; ++i) batch *= out_shape.dim_size(i);
  for (int64_t b = 0; b < batch; ++b) {
    // The batch index in each operand.
    int64_t r = b, xi = 0, yi = 0, xs = 1, ys = 1;
    for (int i = nb - 1; i >= 0; --i) {
      const int64_t c = r % out_shape.dim_size(i);
      r /= out_shape.dim_size(i);
      const int ix = i - (nb - (xr - 2)), iy = i - (nb - (yr - 2));
      if (ix >= 0) {
        xi += (x.dim_size(ix) == 1 ? 0 : c) * xs;
        xs *= x.dim_size(ix);
      }
      if (iy >= 0) {
        yi += (y.dim_size(iy) == 1 ? 0 : c) * ys;
        ys *= y.dim_size(iy);
      }
    }
    const float* xp = x.data<float>() + xi * xrows * xcols;
    const float* yp = y.data<float>() + yi * yrows * ycols;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          const float a = ax ? xp[p * xcols + i] : xp[i * xcols + p];
          const float bb = ay ? yp[j * ycols + p] : yp[p * ycols + j];
          acc += static_cast<double>(a) * bb;
        }
        out.data<float>()[(b * m + i) * n + j] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

TensorShape SwapLastTwo(const TensorShape& s) {
  TensorShape out;
  const int r = s.dims();
  for (int i = 0; i < r - 2; ++i) out.AddDim(s.dim_size(i)).IgnoreError();
  out.AddDim(s.dim_size(r - 1)).IgnoreError();
  out.AddDim(s.dim_size(r - 2)).IgnoreError();
  return out;
}

struct Case {
  TensorShape x, y, out;  // x and y before adj
};

TEST(BatchMatMulKernelTest, BroadcastPatternsAdjointsAndThreads) {
  // Shapes for adj false/false; the adj variants transpose the stored x / y.
  const std::vector<Case> cases = {
      {{4, 3, 5}, {4, 5, 2}, {4, 3, 2}},            // same batch
      {{2, 3, 6, 5}, {2, 3, 5, 7}, {2, 3, 6, 7}},    // rank 4, attention-like
      {{3, 5}, {4, 5, 2}, {4, 3, 2}},               // x shared, lower rank
      {{4, 3, 5}, {5, 2}, {4, 3, 2}},               // y shared
      {{2, 1, 3, 5}, {1, 4, 5, 2}, {2, 4, 3, 2}},   // partial broadcast both ways
      {{1, 3, 5}, {6, 5, 2}, {6, 3, 2}},            // batch 1 against 6
      {{2, 3, 0}, {2, 0, 4}, {2, 3, 4}},            // k = 0: zeros
      {{0, 3, 5}, {0, 5, 2}, {0, 3, 2}},            // no batches
  };
  for (int threads : {1, 4}) {
    StandaloneCpuDevice dev(threads);
    std::mt19937 rng(7);
    for (const Case& c : cases) {
      for (bool ax : {false, true}) {
        for (bool ay : {false, true}) {
          const TensorShape xs = ax ? SwapLastTwo(c.x) : c.x;
          const TensorShape ys = ay ? SwapLastTwo(c.y) : c.y;
          SCOPED_TRACE(absl::StrCat(xs.DebugString(), " x ", ys.DebugString(), " adj ", ax, ay, " threads ", threads));
          const Tensor x = RandomTensor<float>(xs, rng, -2, 2);
          const Tensor y = RandomTensor<float>(ys, rng, -2, 2);
          auto out = RunKernel(&dev, "BatchMatMulV2", {x, y}, {{"adj_x", MakeAttr(ax)}, {"adj_y", MakeAttr(ay)}});
          ASSERT_TRUE(out.ok()) << out.status();
          ASSERT_EQ((*out)[0].shape(), c.out);
          ExpectTensorNear<float>((*out)[0], Reference(x, y, ax, ay, c.out), 1e-4);
        }
      }
    }
  }
}

TEST(BatchMatMulKernelTest, ShapesThatDoNotFitAreNamed) {
  StandaloneCpuDevice dev(1);
  std::mt19937 rng(1);
  auto bad_batch = RunKernel(&dev, "BatchMatMulV2",
                             {RandomTensor<float>({2, 3, 4}, rng, -1, 1), RandomTensor<float>({3, 4, 5}, rng, -1, 1)}, {});
  ASSERT_FALSE(bad_batch.ok());
  EXPECT_NE(bad_batch.status().message().find("does not broadcast (2 vs 3)"), std::string::npos) << bad_batch.status();
  auto bad_inner = RunKernel(&dev, "BatchMatMulV2",
                             {RandomTensor<float>({2, 3, 4}, rng, -1, 1), RandomTensor<float>({2, 5, 5}, rng, -1, 1)}, {});
  ASSERT_FALSE(bad_inner.ok());
  EXPECT_NE(bad_inner.status().message().find("inner dimensions differ (4 vs 5)"), std::string::npos)
      << bad_inner.status();
}

TEST(BatchMatMulKernelTest, Bfloat16MultipliesInFloatAndRoundsOnce) {
  StandaloneCpuDevice dev(2);
  std::mt19937 rng(3);
  const Tensor x = RandomTensor<float>({3, 8, 64}, rng, -1, 1);
  const Tensor y = RandomTensor<float>({3, 64, 8}, rng, -1, 1);
  auto xb = RunKernel(&dev, "Cast", {x}, {{"DstT", MakeAttr(DT_BFLOAT16)}});
  auto yb = RunKernel(&dev, "Cast", {y}, {{"DstT", MakeAttr(DT_BFLOAT16)}});
  ASSERT_TRUE(xb.ok() && yb.ok());
  auto xr = RunKernel(&dev, "Cast", {(*xb)[0]}, {{"DstT", MakeAttr(DT_FLOAT)}});
  auto yr = RunKernel(&dev, "Cast", {(*yb)[0]}, {{"DstT", MakeAttr(DT_FLOAT)}});
  auto z = RunKernel(&dev, "BatchMatMulV2", {(*xb)[0], (*yb)[0]}, {});
  ASSERT_TRUE(z.ok()) << z.status();
  auto zf = RunKernel(&dev, "Cast", {(*z)[0]}, {{"DstT", MakeAttr(DT_FLOAT)}});
  ASSERT_TRUE(zf.ok());
  // Against the exact product of the rounded inputs: one bfloat16 rounding
  // of the result (relative 2^-8), no accumulation error on top.
  const Tensor want = Reference((*xr)[0], (*yr)[0], false, false, TensorShape{3, 8, 8});
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    const float w = want.data<float>()[i], g = (*zf)[0].data<float>()[i];
    EXPECT_NEAR(g, w, std::abs(w) * (1.0 / 256) + 1e-6) << "element " << i;
  }
}

}  // namespace
}  // namespace strata
