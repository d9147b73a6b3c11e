// FusedBatchNormV3 and FusedBatchNormGradV3 against references written from
// the definitions (per-channel loops in double), in NHWC and NCHW, training
// (with and without moving averages) and inference; the errors.
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/attr_value.h"
#include "gtest/gtest.h"
#include "kernels/kernel_runner.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

Tensor Random(const TensorShape& shape, std::mt19937* rng, double lo = -2, double hi = 2) {
  Tensor t(DT_DOUBLE, shape);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<double>()[i] = u(*rng);
  return t;
}

std::map<std::string, AttrValue> Attrs(bool training, const std::string& format, float factor = 1.0f) {
  return {{"epsilon", MakeAttr(1e-3f)},
          {"exponential_avg_factor", MakeAttr(factor)},
          {"data_format", MakeAttr(format)},
          {"is_training", MakeAttr(training)}};
}

// The channel of flat index k of an NHWC ([n, h, w, c]) or NCHW ([n, c, h, w]) x.
int64_t ChannelOf(const TensorShape& s, const std::string& format, int64_t k) {
  return format == "NHWC" ? k % s.dim_size(3) : (k / (s.dim_size(2) * s.dim_size(3))) % s.dim_size(1);
}

TEST(FusedBatchNormTest, MatchesTheDefinition) {
  StandaloneCpuDevice dev(2);
  std::mt19937 rng(21);
  for (const std::string format : {"NHWC", "NCHW"}) {
    const TensorShape shape = format == "NHWC" ? TensorShape{3, 4, 5, 6} : TensorShape{3, 6, 4, 5};
    const Tensor x = Random(shape, &rng), scale = Random({6}, &rng, 0.5, 1.5), offset = Random({6}, &rng);
    const Tensor mean = Random({6}, &rng), var = Random({6}, &rng, 0.5, 1.5);
    for (const bool training : {true, false}) {
      for (const float factor : {1.0f, 0.25f}) {
        SCOPED_TRACE(format + (training ? " training" : " inference") + " factor " + std::to_string(factor));
        auto out = RunKernel(&dev, "FusedBatchNormV3", {x, scale, offset, mean, var}, Attrs(training, format, factor));
        ASSERT_TRUE(out.ok()) << out.status();
        // Per-channel statistics by the definition.
        std::vector<double> m(6, 0), v(6, 0), count(6, 0);
        for (int64_t k = 0; k < x.NumElements(); ++k) {
          m[ChannelOf(shape, format, k)] += x.data<double>()[k];
          count[ChannelOf(shape, format, k)] += 1;
        }
        for (int c = 0; c < 6; ++c) m[c] /= count[c];
        for (int64_t k = 0; k < x.NumElements(); ++k) {
          const double d = x.data<double>()[k] - m[ChannelOf(shape, format, k)];
          v[ChannelOf(shape, format, k)] += d * d / count[ChannelOf(shape, format, k)];
        }
        for (int64_t k = 0; k < x.NumElements(); ++k) {
          const int64_t c = ChannelOf(shape, format, k);
          const double mu = training ? m[c] : mean.data<double>()[c];
          const double var_c = training ? v[c] : var.data<double>()[c];
          const double want = scale.data<double>()[c] * (x.data<double>()[k] - mu) / std::sqrt(var_c + 1e-3) +
                              offset.data<double>()[c];
          ASSERT_NEAR((*out)[0].data<double>()[k], want, 1e-9) << k;
        }
        for (int c = 0; c < 6; ++c) {
          const double unbiased = v[c] * count[c] / (count[c] - 1);
          const double f = factor;
          const double want_mean = !training ? mean.data<double>()[c]
                                   : factor == 1.0f ? m[c]
                                                    : (1 - f) * mean.data<double>()[c] + f * m[c];
          const double want_var = !training ? var.data<double>()[c]
                                  : factor == 1.0f ? unbiased
                                                   : (1 - f) * var.data<double>()[c] + f * unbiased;
          EXPECT_NEAR((*out)[1].data<double>()[c], want_mean, 1e-9) << c;
          EXPECT_NEAR((*out)[2].data<double>()[c], want_var, 1e-9) << c;
        }
      }
    }
  }
}

TEST(FusedBatchNormTest, TrainingWithoutMovingStatisticsAndItsGradient) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(22);
  const Tensor x = Random({2, 3, 3, 4}, &rng), scale = Random({4}, &rng, 0.5, 1.5), offset = Random({4}, &rng);
  const Tensor empty(DT_DOUBLE, TensorShape{0});
  auto out = RunKernel(&dev, "FusedBatchNormV3", {x, scale, offset, empty, empty}, Attrs(true, "NHWC"));
  ASSERT_TRUE(out.ok()) << out.status();
  // Normalized per channel: each channel of (y - offset) / scale has mean 0.
  for (int c = 0; c < 4; ++c) {
    double sum = 0;
    for (int64_t k = c; k < x.NumElements(); k += 4) {
      sum += ((*out)[0].data<double>()[k] - offset.data<double>()[c]) / scale.data<double>()[c];
    }
    EXPECT_NEAR(sum, 0, 1e-9);
  }
  // d(sum(y * w))/doffset = sum of w per channel; dx sums to 0 per channel.
  const Tensor w = Random(x.shape(), &rng);
  auto g = RunKernel(&dev, "FusedBatchNormGradV3", {w, x, scale, (*out)[3], (*out)[4], (*out)[5]},
                     {{"epsilon", MakeAttr(1e-3f)}, {"data_format", MakeAttr("NHWC")}, {"is_training", MakeAttr(true)}});
  ASSERT_TRUE(g.ok()) << g.status();
  for (int c = 0; c < 4; ++c) {
    double sum_w = 0, sum_dx = 0;
    for (int64_t k = c; k < x.NumElements(); k += 4) {
      sum_w += w.data<double>()[k];
      sum_dx += (*g)[0].data<double>()[k];
    }
    EXPECT_NEAR((*g)[2].data<double>()[c], sum_w, 1e-9);
    EXPECT_NEAR(sum_dx, 0, 1e-9);
  }
}

TEST(FusedBatchNormTest, BadInputsNameWhatIsWrong) {
  StandaloneCpuDevice dev;
  std::mt19937 rng(23);
  const Tensor x = Random({2, 3, 3, 4}, &rng), c4 = Random({4}, &rng, 0.5, 1.5), c3 = Random({3}, &rng);
  EXPECT_THAT(RunKernel(&dev, "FusedBatchNormV3", {x, c3, c4, c4, c4}, Attrs(true, "NHWC")).status().message(),
              HasSubstr("scale must be [4]"));
  EXPECT_THAT(RunKernel(&dev, "FusedBatchNormV3", {x, c4, c4, Tensor(DT_DOUBLE, TensorShape{0}), c4},
                        Attrs(false, "NHWC"))
                  .status()
                  .message(),
              HasSubstr("mean must be [4]"));
  EXPECT_THAT(RunKernel(&dev, "FusedBatchNormV3", {Random({3, 4}, &rng), c4, c4, c4, c4}, Attrs(true, "NHWC"))
                  .status()
                  .message(),
              HasSubstr("x must be rank 4"));
  EXPECT_THAT(RunKernel(&dev, "FusedBatchNormV3", {x, c4, c4, c4, c4}, Attrs(true, "HWCN")).status().message(),
              HasSubstr("data_format 'HWCN'"));
}

}  // namespace
}  // namespace strata
