#include "runtime/placement.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/allocator.h"
#include "graph/ops/core_ops.h"
#include "graph/scope.h"
#include "graph/shape_inference.h"
#include "gtest/gtest.h"
#include "kernels/kernel_registry.h"

namespace strata {
namespace {

// One op with a kernel on the host only (as RandomUniform), one on the
// accelerator only; the devices below stand in for a host and a GPU.
STRATA_REGISTER_OP("_PlaceTestHostOnly").Output("y: float").SetShapeFn(ScalarShape);
STRATA_REGISTER_OP("_PlaceTestGpuOnly").Input("x: float").Output("y: float").SetShapeFn(
    UnchangedShape);

class PassThrough : public OpKernel {
 public:
  explicit PassThrough(OpKernelConstruction& c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext&) override { return absl::OkStatus(); }
};
STRATA_REGISTER_KERNEL(KernelBuilder("_PlaceTestHostOnly").Device(kDeviceCpu), PassThrough);
STRATA_REGISTER_KERNEL(KernelBuilder("_PlaceTestGpuOnly").Device(kDeviceGpu), PassThrough);

// Placement only names and orders devices; nothing runs on these.
class NamedDevice : public Device {
 public:
  explicit NamedDevice(const DeviceName& n) : Device(n) {}
  Allocator* allocator() const override { return CpuAllocator(); }
  const Eigen::ThreadPoolDevice* eigen_cpu_device() const override { return nullptr; }
};

// Two tasks of job "worker", each with a CPU and a GPU; task 0's first.
std::unique_ptr<DeviceMgr> TwoTasks() {
  std::vector<std::unique_ptr<Device>> devs;
  for (int task : {0, 1}) {
    for (const char* type : {kDeviceCpu, kDeviceGpu}) {
      devs.push_back(std::make_unique<NamedDevice>(DeviceName::Full("worker", 0, task, type, 0)));
    }
  }
  return std::move(DeviceMgr::Create(std::move(devs))).value();
}

// `host_only` (requesting `device`) feeding a GPU-only consumer on the same
// request.
void Build(const Scope& root, const std::string& device) {
  Scope s = root.WithDevice(device);
  Output h(NodeBuilder(s.WithOpName("host_only"), "_PlaceTestHostOnly").Finalize(), 0);
  NodeBuilder(s.WithOpName("gpu_only"), "_PlaceTestGpuOnly").Input(h).Finalize();
}

std::string Assigned(const Scope& root, const std::string& name) {
  for (Node* n : root.graph()->nodes()) {
    if (n->name() == name) return n->assigned_device_name();
  }
  return "(no node " + name + ")";
}

TEST(PlacementTest, WithoutFallbackAMissingKernelIsAnErrorNamingNodeAndDevice) {
  auto mgr = TwoTasks();
  Scope root = Scope::NewRootScope();
  Build(root, "/job:worker/task:1/device:GPU:0");
  absl::Status s = PlaceGraph(root.graph(), *mgr, PlacementOptions{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("'host_only'"), std::string::npos) << s;
  EXPECT_NE(s.message().find("has no GPU kernel"), std::string::npos) << s;
}

TEST(PlacementTest, HostFallbackRunsTheNodeOnTheCpuOfTheRequestedTask) {
  auto mgr = TwoTasks();
  Scope root = Scope::NewRootScope();
  Build(root, "/job:worker/task:1/device:GPU:0");
  PlacementOptions opts;
  opts.host_fallback_without_kernel = true;
  ASSERT_TRUE(PlaceGraph(root.graph(), *mgr, opts).ok());
  // Task 1's host, not the default device (task 0's CPU).
  EXPECT_EQ(Assigned(root, "host_only"), "/job:worker/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(Assigned(root, "gpu_only"), "/job:worker/replica:0/task:1/device:GPU:0");
}

TEST(PlacementTest, HostFallbackStillRefusesADeviceThatDoesNotExist) {
  auto mgr = TwoTasks();
  Scope root = Scope::NewRootScope();
  Build(root, "/job:worker/task:1/device:GPU:3");
  PlacementOptions opts;
  opts.host_fallback_without_kernel = true;
  absl::Status s = PlaceGraph(root.graph(), *mgr, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("does not exist"), std::string::npos) << s;
}

TEST(PlacementTest, HostFallbackNeedsAHostOfThatTask) {
  std::vector<std::unique_ptr<Device>> devs;
  devs.push_back(std::make_unique<NamedDevice>(DeviceName::Full("worker", 0, 0, kDeviceCpu, 0)));
  devs.push_back(std::make_unique<NamedDevice>(DeviceName::Full("worker", 0, 1, kDeviceGpu, 0)));
  auto mgr = std::move(DeviceMgr::Create(std::move(devs))).value();
  Scope root = Scope::NewRootScope();
  Build(root, "/job:worker/task:1/device:GPU:0");
  PlacementOptions opts;
  opts.host_fallback_without_kernel = true;
  absl::Status s = PlaceGraph(root.graph(), *mgr, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("'host_only'"), std::string::npos) << s;
}

}  // namespace
}  // namespace strata
