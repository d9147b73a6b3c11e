// Random kernels: Philox known answers, reproducibility across thread counts
// and runs, and distribution sanity (moments with generous tolerances).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "gmock/gmock.h"
#include "graph/op_registry.h"
#include "graph/ops/core_ops.h"
#include "graph/ops/random_ops.h"
#include "graph/scope.h"
#include "gtest/gtest.h"
#include "kernels/cpu/philox.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/kernel_runner.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

// One kernel instance that can be run several times (RunKernel makes a new
// instance per call, and the run count is per instance).
class RandomKernel {
 public:
  static absl::StatusOr<std::unique_ptr<RandomKernel>> Make(DeviceBase* dev, const std::string& op,
                                                            DataType dtype, int64_t seed,
                                                            int64_t seed2) {
    auto k = std::unique_ptr<RandomKernel>(new RandomKernel(dev));
    STRATA_ASSIGN_OR_RETURN(const OpDef* def, OpRegistry::Global()->LookUp(op));
    k->node_.set_name("random");
    k->node_.set_op(op);
    auto& a = *k->node_.mutable_attr();
    a["dtype"] = MakeAttr(dtype);
    a["T"] = MakeAttr(DT_INT32);
    a["seed"] = MakeAttr(seed);
    a["seed2"] = MakeAttr(seed2);
    STRATA_RETURN_IF_ERROR(ValidateAndCompleteAttrs(*def, &k->node_));
    std::vector<DataType> in, out;
    STRATA_RETURN_IF_ERROR(InOutTypesForNode(k->node_, *def, &in, &out));
    STRATA_ASSIGN_OR_RETURN(k->kernel_, CreateOpKernel(dev, k->node_, *def, in, out));
    return k;
  }

  absl::StatusOr<Tensor> Run(const std::vector<int32_t>& shape) {
    Tensor input = Tensor::FromVector<int32_t>(shape);
    OpKernelContext::Params p;
    p.op_kernel = kernel_.get();
    p.device = dev_;
    p.inputs = &input;
    OpKernelContext ctx(p);
    STRATA_RETURN_IF_ERROR(kernel_->Compute(ctx));
    return ctx.outputs()[0];
  }

 private:
  explicit RandomKernel(DeviceBase* dev) : dev_(dev) {}
  DeviceBase* dev_;
  ::tensorflow::NodeDef node_;
  std::unique_ptr<OpKernel> kernel_;
};

std::vector<double> AsDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.NumElements()));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t.dtype()) {
      case DT_FLOAT: v[i] = t.data<float>()[i]; break;
      case DT_DOUBLE: v[i] = t.data<double>()[i]; break;
      case DT_HALF: v[i] = static_cast<float>(t.data<Eigen::half>()[i]); break;
      case DT_BFLOAT16: v[i] = static_cast<float>(t.data<Eigen::bfloat16>()[i]); break;
      default: ADD_FAILURE() << "unexpected dtype"; break;
    }
  }
  return v;
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

Tensor MustRun(RandomKernel* k, const std::vector<int32_t>& shape) {
  auto t = k->Run(shape);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : Tensor();
}

std::unique_ptr<RandomKernel> MustMake(DeviceBase* dev, const std::string& op, DataType dtype,
                                       int64_t seed, int64_t seed2) {
  auto k = RandomKernel::Make(dev, op, dtype, seed, seed2);
  EXPECT_TRUE(k.ok()) << k.status();
  return k.ok() ? *std::move(k) : nullptr;
}

const char* const kOps[] = {"RandomUniform", "RandomStandardNormal", "TruncatedNormal"};

TEST(PhiloxTest, KnownAnswers) {
  // Random123's known-answer vectors for philox4x32-10.
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}),
            (PhiloxBlock{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(Philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (PhiloxBlock{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(Philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (PhiloxBlock{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(PhiloxTest, UniformConversionsStayBelowOne) {
  EXPECT_EQ(Uint32ToUniformFloat(0), 0.0f);
  EXPECT_LT(Uint32ToUniformFloat(0xffffffffu), 1.0f);
  EXPECT_EQ(Uint64ToUniformDouble(0, 0), 0.0);
  EXPECT_LT(Uint64ToUniformDouble(0xffffffffu, 0xffffffffu), 1.0);
}

TEST(RandomKernelsTest, SameSeedSameNumbersOnOneAndFourThreads) {
  StandaloneCpuDevice one(1), four(4);
  for (const char* op : kOps) {
    for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_HALF}) {
      SCOPED_TRACE(absl::StrCat(op, " ", DataTypeString(dt)));
      auto a = MustMake(&one, op, dt, 42, 7);
      auto b = MustMake(&four, op, dt, 42, 7);
      ASSERT_TRUE(a && b);
      // Odd sizes, so the last Philox block is partly used; big enough to be
      // split over the four threads.
      for (int run = 0; run < 2; ++run) {
        Tensor x = MustRun(a.get(), {1001, 257});
        Tensor y = MustRun(b.get(), {1001, 257});
        EXPECT_EQ(x.shape(), (TensorShape{1001, 257}));
        EXPECT_TRUE(SameBytes(x, y)) << "run " << run;
      }
    }
  }
}

TEST(RandomKernelsTest, RunsDifferAndReplayFromAFreshInstance) {
  StandaloneCpuDevice dev(2);
  for (const char* op : kOps) {
    SCOPED_TRACE(op);
    auto k = MustMake(&dev, op, DT_FLOAT, 3, 0);
    Tensor r1 = MustRun(k.get(), {1000});
    Tensor r2 = MustRun(k.get(), {1000});
    EXPECT_FALSE(SameBytes(r1, r2));
    // A new instance with the same seeds replays the same sequence of runs.
    auto replay = MustMake(&dev, op, DT_FLOAT, 3, 0);
    EXPECT_TRUE(SameBytes(MustRun(replay.get(), {1000}), r1));
    EXPECT_TRUE(SameBytes(MustRun(replay.get(), {1000}), r2));
  }
}

TEST(RandomKernelsTest, ElementDependsOnlyOnItsIndex) {
  StandaloneCpuDevice dev(4);
  for (const char* op : kOps) {
    SCOPED_TRACE(op);
    auto small = MustMake(&dev, op, DT_DOUBLE, 11, 12);
    auto big = MustMake(&dev, op, DT_DOUBLE, 11, 12);
    std::vector<double> s = AsDoubles(MustRun(small.get(), {7}));
    std::vector<double> b = AsDoubles(MustRun(big.get(), {50000}));
    for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i], b[i]) << i;
  }
}

TEST(RandomKernelsTest, SeedsMatterAndZeroSeedsAreRandomPerInstance) {
  StandaloneCpuDevice dev;
  for (const char* op : kOps) {
    SCOPED_TRACE(op);
    Tensor base = MustRun(MustMake(&dev, op, DT_FLOAT, 5, 6).get(), {256});
    EXPECT_FALSE(SameBytes(base, MustRun(MustMake(&dev, op, DT_FLOAT, 5, 7).get(), {256})));
    EXPECT_FALSE(SameBytes(base, MustRun(MustMake(&dev, op, DT_FLOAT, 6, 6).get(), {256})));
    Tensor u1 = MustRun(MustMake(&dev, op, DT_FLOAT, 0, 0).get(), {256});
    Tensor u2 = MustRun(MustMake(&dev, op, DT_FLOAT, 0, 0).get(), {256});
    EXPECT_FALSE(SameBytes(u1, u2));
  }
}

struct Moments {
  double mean, stddev, min, max, frac_beyond_2;
};

Moments Measure(const std::vector<double>& v) {
  Moments m{0, 0, v[0], v[0], 0};
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
    if (std::fabs(x) > 2) m.frac_beyond_2 += 1;
  }
  m.mean /= v.size();
  for (double x : v) m.stddev += (x - m.mean) * (x - m.mean);
  m.stddev = std::sqrt(m.stddev / v.size());
  m.frac_beyond_2 /= v.size();
  return m;
}

TEST(RandomKernelsTest, DistributionsHaveTheRightMoments) {
  StandaloneCpuDevice dev(4);
  // 200k samples: the standard error of the mean is ~0.002.
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_HALF, DT_BFLOAT16}) {
    SCOPED_TRACE(DataTypeString(dt));
    const bool narrow = dt == DT_HALF || dt == DT_BFLOAT16;
    Moments u = Measure(AsDoubles(MustRun(MustMake(&dev, "RandomUniform", dt, 1, 2).get(), {200000})));
    EXPECT_GE(u.min, 0.0);
    EXPECT_LT(u.max, 1.0);
    EXPECT_NEAR(u.mean, 0.5, narrow ? 0.02 : 0.01);
    EXPECT_NEAR(u.stddev, std::sqrt(1.0 / 12), 0.01);

    Moments n = Measure(
        AsDoubles(MustRun(MustMake(&dev, "RandomStandardNormal", dt, 1, 2).get(), {200000})));
    EXPECT_NEAR(n.mean, 0.0, 0.02);
    EXPECT_NEAR(n.stddev, 1.0, 0.02);
    EXPECT_NEAR(n.frac_beyond_2, 0.0455, 0.005);

    Moments t = Measure(
        AsDoubles(MustRun(MustMake(&dev, "TruncatedNormal", dt, 1, 2).get(), {200000})));
    EXPECT_GE(t.min, -2.0);
    EXPECT_LE(t.max, 2.0);
    EXPECT_NEAR(t.mean, 0.0, 0.02);
    EXPECT_NEAR(t.stddev, 0.8796, 0.02);  // a standard normal truncated at +-2
  }
}

TEST(RandomKernelsTest, EmptyScalarAndBadShapes) {
  StandaloneCpuDevice dev;
  auto k = MustMake(&dev, "RandomUniform", DT_FLOAT, 1, 1);
  EXPECT_EQ(MustRun(k.get(), {3, 0}).NumElements(), 0);
  Tensor scalar = MustRun(k.get(), {});
  EXPECT_EQ(scalar.shape(), TensorShape{});
  EXPECT_THAT(k->Run({2, -3}).status().message(), HasSubstr("negative"));
  auto bad = RunKernel(&dev, "RandomUniform", {Tensor::Scalar<int32_t>(3)},
                       {{"dtype", MakeAttr(DT_FLOAT)}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(RunKernel(&dev, "RandomUniform", {Tensor::FromVector<int32_t>({2})},
                         {{"dtype", MakeAttr(DT_INT32)}})
                   .ok());  // not an allowed dtype
}

TEST(RandomOpsTest, StatefulWithShapeFunctionAndBuilder) {
  for (const char* op : kOps) {
    auto def = OpRegistry::Global()->LookUp(op);
    ASSERT_TRUE(def.ok());
    EXPECT_TRUE((*def)->is_stateful) << op;
  }
  Scope s = Scope::NewRootScope();
  Output shape = ops::Const<int32_t>(s, {3, 4});
  Output u = ops::RandomUniform(s, shape, DT_FLOAT, ops::RandomAttrs().Seed(1).Seed2(2));
  Output n = ops::RandomNormal(s, shape, DT_DOUBLE);
  Output t = ops::TruncatedNormal(s, ops::Const<int64_t>(s, {5}), DT_FLOAT);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(u.shape(), PartialTensorShape({3, 4}));
  EXPECT_EQ(u.type(), DT_FLOAT);
  EXPECT_EQ(u.node()->type_string(), "RandomUniform");
  EXPECT_EQ(u.node()->attrs().at("seed").i(), 1);
  EXPECT_EQ(u.node()->attrs().at("seed2").i(), 2);
  EXPECT_EQ(n.node()->type_string(), "RandomStandardNormal");
  EXPECT_EQ(n.type(), DT_DOUBLE);
  EXPECT_EQ(t.shape(), PartialTensorShape({5}));
  Output dyn = ops::RandomUniform(s, ops::Placeholder(s, DT_INT32, PartialTensorShape({2})),
                                  DT_FLOAT);
  EXPECT_EQ(dyn.shape(), PartialTensorShape({-1, -1}));

  ops::RandomUniform(s.WithOpName("neg"), ops::Const<int32_t>(s, {2, -1}), DT_FLOAT);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("neg"));
}

// StatelessRandomUniform against TensorFlow 2.21's
// tf.raw_ops.StatelessRandomUniform (the values' bits, printed there).
template <typename Bits>
std::vector<Bits> BitsOf(const Tensor& t) {
  std::vector<Bits> v(static_cast<size_t>(t.NumElements()));
  std::memcpy(v.data(), t.raw_data(), t.TotalBytes());
  return v;
}

absl::StatusOr<Tensor> Stateless(DeviceBase* dev, DataType dtype, const std::vector<int32_t>& shape,
                                 const Tensor& seed) {
  STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                          RunKernel(dev, "StatelessRandomUniform", {Tensor::FromVector<int32_t>(shape), seed},
                                    {{"dtype", MakeAttr(dtype)}}));
  return out[0];
}

TEST(StatelessRandomUniformTest, MatchesTensorFlowBitForBit) {
  static StandaloneCpuDevice dev(2);
  auto run = [&](DataType dt, std::vector<int32_t> shape, Tensor seed) {
    absl::StatusOr<Tensor> t = Stateless(&dev, dt, shape, seed);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : Tensor();
  };
  Tensor f = run(DT_FLOAT, {2, 3}, Tensor::FromVector<int64_t>({1, 2}));
  EXPECT_EQ(f.shape(), (TensorShape{2, 3}));
  EXPECT_EQ(BitsOf<uint32_t>(f), (std::vector<uint32_t>{0x3f581458, 0x3e44a788, 0x3f7f087c, 0x3e243c98,
                                                        0x3e8b424c, 0x3f263b8a}));
  EXPECT_EQ(BitsOf<uint32_t>(run(DT_FLOAT, {5}, Tensor::FromVector<int64_t>({-5, 123456789012}))),
            (std::vector<uint32_t>{0x3e9939c8, 0x3c225900, 0x3e85a4f0, 0x3ecee334, 0x3d6a0b40}));
  EXPECT_EQ(BitsOf<uint64_t>(run(DT_DOUBLE, {5}, Tensor::FromVector<int64_t>({3, -9}))),
            (std::vector<uint64_t>{0x3fe5ee44752776d8, 0x3fcf3a7cce018768, 0x3feb34f146d07fd8,
                                   0x3fd3b03629828760, 0x3fd145e7a46ef034}));
  EXPECT_EQ(BitsOf<uint16_t>(run(DT_HALF, {6}, Tensor::FromVector<int32_t>({7, -3}))),
            (std::vector<uint16_t>{0x38b6, 0x39ec, 0x3720, 0x3968, 0x383e, 0x3614}));
  EXPECT_EQ(BitsOf<uint16_t>(run(DT_BFLOAT16, {6}, Tensor::FromVector<int32_t>({7, -3}))),
            (std::vector<uint16_t>{0x3f36, 0x3f6c, 0x3f10, 0x3ed0, 0x3e78, 0x3d20}));
}

TEST(StatelessRandomUniformTest, SameSeedSameTensorOnAnyThreadCountAndPrefix) {
  static StandaloneCpuDevice one(1), four(4);
  const Tensor seed = Tensor::FromVector<int64_t>({11, -12});
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_HALF}) {
    SCOPED_TRACE(DataTypeString(dt));
    absl::StatusOr<Tensor> a = Stateless(&one, dt, {1001, 257}, seed);
    absl::StatusOr<Tensor> b = Stateless(&four, dt, {1001, 257}, seed);
    absl::StatusOr<Tensor> small = Stateless(&four, dt, {13}, seed);
    ASSERT_TRUE(a.ok() && b.ok() && small.ok()) << a.status() << b.status() << small.status();
    EXPECT_TRUE(SameBytes(*a, *b));
    // Element i depends on i only: a shorter tensor is a prefix.
    EXPECT_EQ(std::memcmp(a->raw_data(), small->raw_data(), small->TotalBytes()), 0);
    std::vector<double> v = AsDoubles(*a);
    EXPECT_GE(*std::min_element(v.begin(), v.end()), 0.0);
    EXPECT_LT(*std::max_element(v.begin(), v.end()), 1.0);
    double mean = 0;
    for (double x : v) mean += x / static_cast<double>(v.size());
    EXPECT_NEAR(mean, 0.5, 0.01);
  }
  absl::StatusOr<Tensor> other = Stateless(&one, DT_FLOAT, {1001, 257}, Tensor::FromVector<int64_t>({11, -13}));
  absl::StatusOr<Tensor> same = Stateless(&one, DT_FLOAT, {1001, 257}, seed);
  ASSERT_TRUE(other.ok() && same.ok());
  EXPECT_FALSE(SameBytes(*other, *same));
}

TEST(StatelessRandomUniformTest, BadSeedIsInvalidArgument) {
  static StandaloneCpuDevice dev(1);
  absl::StatusOr<Tensor> t = Stateless(&dev, DT_FLOAT, {3}, Tensor::FromVector<int64_t>({1, 2, 3}));
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("seed must have shape [2]"));
  Scope root = Scope::NewRootScope();
  Output bad = ops::StatelessRandomUniform(root, ops::Const<int32_t>(root, {4}),
                                           ops::Const<int64_t>(root, {1, 2, 3}), DT_FLOAT);
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(root.status().message(), HasSubstr("seed must have shape [2]"));
  Scope ok_root = Scope::NewRootScope();
  Output good = ops::StatelessRandomUniform(ok_root, ops::Const<int32_t>(ok_root, {4, 5}),
                                            ops::Const<int64_t>(ok_root, {1, 2}), DT_DOUBLE);
  ASSERT_TRUE(ok_root.ok()) << ok_root.status();
  EXPECT_EQ(good.shape(), PartialTensorShape({4, 5}));
  EXPECT_EQ(good.type(), DT_DOUBLE);
}

}  // namespace
}  // namespace strata
