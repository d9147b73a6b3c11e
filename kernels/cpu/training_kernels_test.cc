// The optimizer kernels against TensorFlow's documented update formulas,
// written out here as plain loops in double precision.
#include <cmath>
#include <random>
#include <vector>

#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "kernels/kernel_runner.h"
#include "kernels/resource_mgr.h"

namespace strata {
namespace {

class ResourceCpuDevice : public StandaloneCpuDevice {
 public:
  explicit ResourceCpuDevice(int threads = 1) : StandaloneCpuDevice(threads), rm_("cpu") {}
  ResourceMgr* resource_manager() const override { return &rm_; }

 private:
  mutable ResourceMgr rm_;
};

template <typename T>
class TrainingKernelsTest : public ::testing::Test {
 protected:
  // A variable named `name` holding `values`.
  Tensor MakeVar(const std::string& name, const std::vector<T>& values) {
    auto h = RunKernel(&dev_, "VarHandleOp", {},
                       {{"shared_name", MakeAttr(name)},
                        {"dtype", MakeAttr(DataTypeToEnum<T>::value)},
                        {"shape", MakeAttr(PartialTensorShape::UnknownRank())}});
    EXPECT_TRUE(h.ok()) << h.status();
    auto a = RunKernel(&dev_, "AssignVariableOp", {(*h)[0], Tensor::FromVector<T>(values)});
    EXPECT_TRUE(a.ok()) << a.status();
    return (*h)[0];
  }
  std::vector<T> Get(const Tensor& h) {
    auto r = RunKernel(&dev_, "ReadVariableOp", {h}, {{"dtype", MakeAttr(DataTypeToEnum<T>::value)}});
    EXPECT_TRUE(r.ok()) << r.status();
    const Tensor& t = (*r)[0];
    return std::vector<T>(t.data<T>(), t.data<T>() + t.NumElements());
  }
  static std::vector<T> Random(int n, int seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(u(gen));
    return v;
  }
  static void ExpectNear(const std::vector<T>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    const double tol = std::is_same<T, float>::value ? 2e-5 : 1e-12;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
    }
  }

  ResourceCpuDevice dev_{4};
};

using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TrainingKernelsTest, Types);

// Sizes below and above the inline threshold (the latter runs on the pool,
// with a ragged last block).
const int kSizes[] = {7, 50001};

TYPED_TEST(TrainingKernelsTest, GradientDescent) {
  using T = TypeParam;
  for (int n : kSizes) {
    auto w0 = this->Random(n, 1);
    auto g = this->Random(n, 2);
    Tensor w = this->MakeVar("w" + std::to_string(n), w0);
    std::vector<double> want(w0.begin(), w0.end());
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(RunKernel(&this->dev_, "ResourceApplyGradientDescent",
                            {w, Tensor::Scalar<T>(T(0.1)), Tensor::FromVector<T>(g)})
                      .ok());
      for (int i = 0; i < n; ++i) want[i] -= double(T(0.1)) * g[i];
    }
    this->ExpectNear(this->Get(w), want);
  }
}

TYPED_TEST(TrainingKernelsTest, Momentum) {
  using T = TypeParam;
  for (bool nesterov : {false, true}) {
    for (int n : kSizes) {
      const std::string tag = std::to_string(n) + (nesterov ? "n" : "");
      auto w0 = this->Random(n, 3);
      Tensor w = this->MakeVar("w" + tag, w0);
      Tensor acc = this->MakeVar("acc" + tag, std::vector<T>(n, T(0)));
      std::vector<double> want(w0.begin(), w0.end()), accum(n, 0.0);
      const double lr = double(T(0.05)), mom = double(T(0.9));
      for (int step = 0; step < 4; ++step) {
        auto g = this->Random(n, 10 + step);
        auto s = RunKernel(&this->dev_, "ResourceApplyMomentum",
                           {w, acc, Tensor::Scalar<T>(T(0.05)), Tensor::FromVector<T>(g),
                            Tensor::Scalar<T>(T(0.9))},
                           {{"use_nesterov", MakeAttr(nesterov)}});
        ASSERT_TRUE(s.ok()) << s.status();
        for (int i = 0; i < n; ++i) {
          accum[i] = accum[i] * mom + g[i];
          want[i] -= nesterov ? g[i] * lr + accum[i] * mom * lr : accum[i] * lr;
        }
      }
      this->ExpectNear(this->Get(w), want);
      this->ExpectNear(this->Get(acc), accum);
    }
  }
}

TYPED_TEST(TrainingKernelsTest, Adam) {
  using T = TypeParam;
  for (bool nesterov : {false, true}) {
    for (int n : kSizes) {
      const std::string tag = std::to_string(n) + (nesterov ? "n" : "");
      auto w0 = this->Random(n, 5);
      Tensor w = this->MakeVar("w" + tag, w0);
      Tensor m = this->MakeVar("m" + tag, std::vector<T>(n, T(0)));
      Tensor v = this->MakeVar("v" + tag, std::vector<T>(n, T(0)));
      std::vector<double> want(w0.begin(), w0.end()), mm(n, 0.0), vv(n, 0.0);
      const double lr = double(T(0.01)), b1 = double(T(0.9)), b2 = double(T(0.999)),
                   eps = double(T(1e-7));
      for (int t = 1; t <= 4; ++t) {
        auto g = this->Random(n, 20 + t);
        const T b1p = static_cast<T>(std::pow(0.9, t)), b2p = static_cast<T>(std::pow(0.999, t));
        auto s = RunKernel(&this->dev_, "ResourceApplyAdam",
                           {w, m, v, Tensor::Scalar<T>(b1p), Tensor::Scalar<T>(b2p),
                            Tensor::Scalar<T>(T(0.01)), Tensor::Scalar<T>(T(0.9)),
                            Tensor::Scalar<T>(T(0.999)), Tensor::Scalar<T>(T(1e-7)),
                            Tensor::FromVector<T>(g)},
                           {{"use_nesterov", MakeAttr(nesterov)}});
        ASSERT_TRUE(s.ok()) << s.status();
        // TensorFlow's ApplyAdam: epsilon outside the sqrt, bias correction in lr_t.
        const double lr_t = lr * std::sqrt(1 - double(b2p)) / (1 - double(b1p));
        for (int i = 0; i < n; ++i) {
          mm[i] += (g[i] - mm[i]) * (1 - b1);
          vv[i] += (double(g[i]) * g[i] - vv[i]) * (1 - b2);
          const double num = nesterov ? mm[i] * b1 + (1 - b1) * g[i] : mm[i];
          want[i] -= lr_t * num / (std::sqrt(vv[i]) + eps);
        }
      }
      this->ExpectNear(this->Get(w), want);
      this->ExpectNear(this->Get(m), mm);
      this->ExpectNear(this->Get(v), vv);
    }
  }
}

TYPED_TEST(TrainingKernelsTest, ReadersKeepTheirSnapshot) {
  using T = TypeParam;
  Tensor w = this->MakeVar("snap", {T(1), T(2)});
  auto before = RunKernel(&this->dev_, "ReadVariableOp", {w},
                          {{"dtype", MakeAttr(DataTypeToEnum<T>::value)}});
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(RunKernel(&this->dev_, "ResourceApplyGradientDescent",
                        {w, Tensor::Scalar<T>(T(1)), Tensor::FromVector<T>({T(1), T(1)})})
                  .ok());
  EXPECT_EQ((*before)[0].template data<T>()[0], T(1));
  EXPECT_EQ(this->Get(w), (std::vector<T>{T(0), T(1)}));
}

TEST(TrainingKernelsErrors, BadInputsAreReported) {
  ResourceCpuDevice dev;
  auto h = RunKernel(&dev, "VarHandleOp", {},
                     {{"shared_name", MakeAttr("w")},
                      {"dtype", MakeAttr(DT_FLOAT)},
                      {"shape", MakeAttr(PartialTensorShape({2}))}});
  ASSERT_TRUE(h.ok());
  Tensor w = (*h)[0];
  // Uninitialized.
  auto s = RunKernel(&dev, "ResourceApplyGradientDescent",
                     {w, Tensor::Scalar<float>(1), Tensor::FromVector<float>({1, 1})});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.status().message().find("'w'"), std::string::npos);
  ASSERT_TRUE(RunKernel(&dev, "AssignVariableOp", {w, Tensor::FromVector<float>({1, 2})}).ok());
  // Gradient of the wrong shape.
  s = RunKernel(&dev, "ResourceApplyGradientDescent",
                {w, Tensor::Scalar<float>(1), Tensor::FromVector<float>({1, 1, 1})});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  // Non-scalar learning rate.
  s = RunKernel(&dev, "ResourceApplyGradientDescent",
                {w, Tensor::FromVector<float>({1, 1}), Tensor::FromVector<float>({1, 1})});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("alpha"), std::string::npos);
  // Wrong dtype for the variable.
  s = RunKernel(&dev, "ResourceApplyGradientDescent",
                {w, Tensor::Scalar<double>(1), Tensor::FromVector<double>({1, 1})});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  // Nothing was changed by the failed updates.
  auto r = RunKernel(&dev, "ReadVariableOp", {w}, {{"dtype", MakeAttr(DT_FLOAT)}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].data<float>()[0], 1.0f);
  EXPECT_EQ((*r)[0].data<float>()[1], 2.0f);
}

}  // namespace
}  // namespace strata
