#include "kernels/gpu/testing/gpu_oracle.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/eigen_views.h"

namespace strata {
namespace gpu_oracle {

double ValueAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DT_FLOAT:
      return t.data<float>()[i];
    case DT_DOUBLE:
      return t.data<double>()[i];
    case DT_INT32:
      return t.data<int32_t>()[i];
    case DT_INT64:
      return static_cast<double>(t.data<int64_t>()[i]);
    case DT_BOOL:
      return t.data<bool>()[i];
    case DT_HALF:
      return static_cast<float>(t.data<Eigen::half>()[i]);
    case DT_BFLOAT16:
      return static_cast<float>(t.data<Eigen::bfloat16>()[i]);
    default:
      return NAN;
  }
}

Tensor Random(DataType dt, const TensorShape& shape, std::mt19937& rng, double lo, double hi) {
  Tensor t(dt, shape);
  std::uniform_real_distribution<double> u(lo, hi);
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    const double v = u(rng);
    switch (dt) {
      case DT_FLOAT:
        t.data<float>()[i] = static_cast<float>(v);
        break;
      case DT_DOUBLE:
        t.data<double>()[i] = v;
        break;
      case DT_INT32:
        t.data<int32_t>()[i] = static_cast<int32_t>(std::floor(v));
        break;
      case DT_INT64:
        t.data<int64_t>()[i] = static_cast<int64_t>(std::floor(v));
        break;
      case DT_BOOL:
        t.data<bool>()[i] = v > (lo + hi) / 2;
        break;
      case DT_HALF:
        t.data<Eigen::half>()[i] = Eigen::half(static_cast<float>(v));
        break;
      case DT_BFLOAT16:
        t.data<Eigen::bfloat16>()[i] = Eigen::bfloat16(static_cast<float>(v));
        break;
      default:
        break;
    }
  }
  return t;
}

// `t` converted elementwise to `dt` on the host (for half/bfloat16 references).
Tensor Convert(const Tensor& t, DataType dt) {
  Tensor out(dt, t.shape());
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    const double v = ValueAt(t, i);
    switch (dt) {
      case DT_FLOAT:
        out.data<float>()[i] = static_cast<float>(v);
        break;
      case DT_HALF:
        out.data<Eigen::half>()[i] = Eigen::half(static_cast<float>(v));
        break;
      case DT_BFLOAT16:
        out.data<Eigen::bfloat16>()[i] = Eigen::bfloat16(static_cast<float>(v));
        break;
      default:
        break;
    }
  }
  return out;
}

void ExpectClose(const Tensor& want, const Tensor& got, double rtol, double atol,
                 const std::string& what) {
  ASSERT_EQ(want.shape(), got.shape()) << what;
  int reported = 0;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    const double w = ValueAt(want, i), g = ValueAt(got, i);
    const bool both_nan = std::isnan(w) && std::isnan(g);
    const bool same_inf = std::isinf(w) && w == g;
    if (both_nan || same_inf) continue;
    if (!(std::abs(w - g) <= atol + rtol * std::abs(w)) && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " of " << want.shape().DebugString() << ": CPU "
                    << w << ", GPU " << g;
    }
  }
}

void GpuOracleTest::SetUp() {
  std::string why;
  if (!GpuAvailable(&why)) GTEST_SKIP() << "no GPU (" << why << "): GPU oracle tests need one";
  auto d = TestGpuDevice::Create();
  ASSERT_TRUE(d.ok()) << d.status();
  gpu_ = *std::move(d);
}

void GpuOracleTest::Check(const std::string& op, const std::vector<Tensor>& in, const Attrs& attrs,
                          Tol tol, const std::string& what) {
  const std::string label = absl::StrCat(op, " ", what);
  auto c = RunKernel(&cpu_, op, in, attrs);
  ASSERT_TRUE(c.ok()) << label << " CPU: " << c.status();
  auto g = RunOnGpu(gpu_.get(), op, in, attrs);
  ASSERT_TRUE(g.ok()) << label << " GPU: " << g.status();
  ASSERT_EQ(c->size(), g->size()) << label;
  for (size_t i = 0; i < c->size(); ++i) {
    ASSERT_EQ((*c)[i].dtype(), (*g)[i].dtype()) << label << " output " << i;
    ExpectClose((*c)[i], (*g)[i], tol.rtol, tol.atol, absl::StrCat(label, " output ", i));
  }
}

void GpuOracleTest::CheckSameError(const std::string& op, const std::vector<Tensor>& in,
                                   const Attrs& attrs, const std::string& what) {
  auto c = RunKernel(&cpu_, op, in, attrs);
  auto g = RunOnGpu(gpu_.get(), op, in, attrs);
  ASSERT_FALSE(c.ok()) << op << " " << what << ": the CPU kernel accepted it";
  EXPECT_EQ(c.status().code(), g.status().code())
      << op << " " << what << ": CPU " << c.status() << ", GPU " << g.status();
}

void GpuOracleTest::CheckLowPrecision(const std::string& op, DataType dt,
                                      const std::vector<Tensor>& float_in, const Attrs& attrs,
                                      Tol tol) {
  std::vector<Tensor> low, rounded;
  for (const Tensor& t : float_in) {
    low.push_back(t.dtype() == DT_FLOAT ? Convert(t, dt) : t);
    rounded.push_back(t.dtype() == DT_FLOAT ? Convert(low.back(), DT_FLOAT) : t);
  }
  auto c = RunKernel(&cpu_, op, rounded, attrs);
  ASSERT_TRUE(c.ok()) << op << " CPU: " << c.status();
  auto g = RunOnGpu(gpu_.get(), op, low, attrs);
  ASSERT_TRUE(g.ok()) << op << " GPU " << DataTypeString(dt) << ": " << g.status();
  for (size_t i = 0; i < c->size(); ++i) {
    ExpectClose((*c)[i], (*g)[i], tol.rtol, tol.atol,
                absl::StrCat(op, " ", DataTypeString(dt), " output ", i));
  }
}

absl::StatusOr<Tensor> MakeVar(DeviceBase* dev, TestGpuDevice* gpu, const std::string& name,
                               const Tensor& value) {
  const Attrs attrs = {{"dtype", MakeAttr(value.dtype())},
                       {"shape", MakeAttr(PartialTensorShape(value.shape()))},
                       {"shared_name", MakeAttr(name)}};
  auto h = gpu != nullptr ? RunOnGpu(gpu, "VarHandleOp", {}, attrs)
                          : RunKernel(dev, "VarHandleOp", {}, attrs);
  if (!h.ok()) return h.status();
  const Tensor handle = (*h)[0];
  auto a = gpu != nullptr ? RunOnGpu(gpu, "AssignVariableOp", {handle, value}, {})
                          : RunKernel(dev, "AssignVariableOp", {handle, value}, {});
  if (!a.ok()) return a.status();
  return handle;
}

}  // namespace gpu_oracle
}  // namespace strata
