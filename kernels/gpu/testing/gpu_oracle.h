// The GPU kernels' oracle (gpu_kernels_oracle_test.cc): each GPU kernel run
// beside the CPU kernel of the same op on the same host tensors, outputs
// compared elementwise within a tolerance; random inputs, 16-bit kernels
// against the CPU's float kernel on the same rounded inputs, variables made
// on either device.
//
//   TEST_F(GpuOracleTest, Relu) { Check("Relu", {Random(DT_FLOAT, {100}, rng_)}, {}, {}); }
//
// The fixture skips the test where no GPU is present.
#ifndef STRATA_KERNELS_GPU_TESTING_GPU_ORACLE_H_
#define STRATA_KERNELS_GPU_TESTING_GPU_ORACLE_H_

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/attr_value.h"
#include "graph/tensor.h"
#include "gtest/gtest.h"
#include "kernels/gpu/testing/test_gpu_device.h"
#include "kernels/kernel_runner.h"
#include "kernels/resource_mgr.h"

namespace strata {
namespace gpu_oracle {

using Attrs = std::map<std::string, AttrValue>;

// A CPU device with a ResourceMgr, for the variable and optimizer ops.
class CpuDeviceWithResources : public StandaloneCpuDevice {
 public:
  CpuDeviceWithResources() : StandaloneCpuDevice(2), rm_(name()) {}
  ResourceMgr* resource_manager() const override { return &rm_; }

 private:
  mutable ResourceMgr rm_;
};

// Element i of a float, double, int32, int64, bool, half or bfloat16 tensor
// as a double (NaN for other types).
double ValueAt(const Tensor& t, int64_t i);
// Uniform values in [lo, hi) (integers floored, bools by the midpoint).
Tensor Random(DataType dt, const TensorShape& shape, std::mt19937& rng, double lo = -2,
              double hi = 2);
// `t` converted elementwise to `dt` on the host (for half/bfloat16 references).
Tensor Convert(const Tensor& t, DataType dt);
// Every element within atol + rtol * |want| (NaNs and equal infinities
// agree); the first 5 differences reported.
void ExpectClose(const Tensor& want, const Tensor& got, double rtol, double atol,
                 const std::string& what);

struct Tol {
  double rtol = 1e-6, atol = 1e-6;
};

class GpuOracleTest : public ::testing::Test {
 protected:
  void SetUp() override;

  // Runs `op` on both devices; every output must agree within `tol`.
  void Check(const std::string& op, const std::vector<Tensor>& in, const Attrs& attrs, Tol tol,
             const std::string& what = "");
  // Bad input: both kernels fail with the same code.
  void CheckSameError(const std::string& op, const std::vector<Tensor>& in, const Attrs& attrs,
                      const std::string& what = "");
  // A 16-bit kernel against the CPU's float kernel on the same rounded inputs.
  void CheckLowPrecision(const std::string& op, DataType dt, const std::vector<Tensor>& float_in,
                         const Attrs& attrs, Tol tol);

  std::mt19937 rng_{1234};
  CpuDeviceWithResources cpu_;
  std::unique_ptr<TestGpuDevice> gpu_;
};

// A variable made and assigned on `dev` (on `gpu` where not null); returns
// its handle.
absl::StatusOr<Tensor> MakeVar(DeviceBase* dev, TestGpuDevice* gpu, const std::string& name,
                               const Tensor& value);

}  // namespace gpu_oracle
}  // namespace strata

#endif  // STRATA_KERNELS_GPU_TESTING_GPU_ORACLE_H_
