#include "train/initializers.h"

#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/session.h"
#include "train/variable.h"

namespace strata {
namespace train {
namespace {

// The value `init` gives a variable of `shape` and `dtype`, in a fresh graph
// and session.
Tensor InitialValue(const Initializer& init, const TensorShape& shape, DataType dtype) {
  Scope root = Scope::NewRootScope();
  Variable* v = CreateVariable(root, "v", shape, dtype, init);
  Output r = v == nullptr ? Output() : v->Read(root);
  EXPECT_TRUE(root.ok()) << root.status();
  if (!root.ok()) return Tensor();
  auto session = Session::Create(root);
  EXPECT_TRUE(session.ok()) << session.status();
  EXPECT_TRUE((*session)->Run({}, {}, {v->initializer()->name()}, nullptr).ok());
  std::vector<Tensor> out;
  EXPECT_TRUE((*session)->Run({}, {r.name()}, {}, &out).ok());
  // A host copy: the fetched tensor's memory belongs to the session's device.
  return out.empty() ? Tensor() : out[0].DeepCopy();
}

template <typename T>
std::vector<double> Values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.NumElements(); ++i) v.push_back(t.data<T>()[i]);
  return v;
}

TEST(InitializersTest, Constants) {
  EXPECT_EQ(Values<float>(InitialValue(Zeros(), TensorShape{2, 2}, DT_FLOAT)),
            (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(Values<double>(InitialValue(Ones(), TensorShape{3}, DT_DOUBLE)),
            (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(Values<int32_t>(InitialValue(Constant(7), TensorShape{2}, DT_INT32)),
            (std::vector<double>{7, 7}));
  EXPECT_EQ(Values<int64_t>(InitialValue(Zeros(), TensorShape{}, DT_INT64)),
            (std::vector<double>{0}));
  EXPECT_EQ(Values<float>(InitialValue(ConstantTensor(Tensor::FromVector<float>({1, 2})),
                                       TensorShape{2}, DT_FLOAT)),
            (std::vector<double>{1, 2}));
}

TEST(InitializersTest, GlorotUniformIsBoundedDeterministicAndSeedDependent) {
  const TensorShape shape{40, 60};
  const double limit = std::sqrt(6.0 / (40 + 60));
  auto a = Values<float>(InitialValue(GlorotUniform(3), shape, DT_FLOAT));
  auto b = Values<float>(InitialValue(GlorotUniform(3), shape, DT_FLOAT));
  auto c = Values<float>(InitialValue(GlorotUniform(4), shape, DT_FLOAT));
  ASSERT_EQ(a.size(), 2400u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  double mean = 0, max_abs = 0;
  for (double x : a) {
    mean += x / a.size();
    max_abs = std::max(max_abs, std::abs(x));
  }
  EXPECT_LE(max_abs, limit);
  EXPECT_GT(max_abs, 0.9 * limit);  // the range is used, not a narrower one
  EXPECT_NEAR(mean, 0.0, 0.1 * limit);
}

TEST(InitializersTest, FansFollowKeras) {
  EXPECT_EQ(ComputeFans(TensorShape{3, 4}).fan_in, 3);
  EXPECT_EQ(ComputeFans(TensorShape{3, 4}).fan_out, 4);
  // A 5x5 convolution from 3 to 16 channels: receptive field 25.
  EXPECT_EQ(ComputeFans(TensorShape{5, 5, 3, 16}).fan_in, 75);
  EXPECT_EQ(ComputeFans(TensorShape{5, 5, 3, 16}).fan_out, 400);
  EXPECT_EQ(ComputeFans(TensorShape{7}).fan_in, 7);
}

TEST(InitializersTest, NormalAndTruncatedNormalMoments) {
  const TensorShape shape{20000};
  auto n = Values<double>(InitialValue(RandomNormal(2.0, 0.5, 1), shape, DT_DOUBLE));
  auto t = Values<float>(InitialValue(TruncatedNormal(-1.0, 0.25, 1), shape, DT_FLOAT));
  auto moments = [](const std::vector<double>& v) {
    double m = 0, s = 0;
    for (double x : v) m += x / v.size();
    for (double x : v) s += (x - m) * (x - m) / v.size();
    return std::make_pair(m, std::sqrt(s));
  };
  auto [nm, ns] = moments(n);
  EXPECT_NEAR(nm, 2.0, 0.02);
  EXPECT_NEAR(ns, 0.5, 0.02);
  auto [tm, ts] = moments(t);
  EXPECT_NEAR(tm, -1.0, 0.01);
  // A normal truncated at two stddevs keeps 88% of the stddev.
  EXPECT_NEAR(ts, 0.25 * 0.8796, 0.01);
  for (double x : t) {
    ASSERT_LE(std::abs(x + 1.0), 0.5 + 1e-6);
  }
  // Deterministic given the seed.
  EXPECT_EQ(n, Values<double>(InitialValue(RandomNormal(2.0, 0.5, 1), shape, DT_DOUBLE)));
}

TEST(InitializersTest, RandomInitializersRejectIntegerDtypes) {
  Scope root = Scope::NewRootScope();
  CreateVariable(root, "v", TensorShape{2}, DT_INT32, GlorotUniform(1));
  EXPECT_EQ(root.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace train
}  // namespace strata
