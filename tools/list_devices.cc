// Lists this machine's devices as Strata sees them: the host CPU and, in a
// --config=cuda build, every GPU, with memory. A table by default, JSON with
// --json.
//
//   bazel run //tools:list_devices
//   bazel run --config=cuda //tools:list_devices -- --json
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tools/list_devices_lib.h"

#ifdef STRATA_WITH_CUDA
#include "runtime/gpu/gpu_info.h"
#endif

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else {
      std::cerr << "list_devices: unknown argument '" << argv[i] << "'; usage: list_devices [--json]\n";
      return 2;
    }
  }
  std::vector<strata::DeviceRow> rows = {strata::HostCpuRow()};
  std::string note;
#ifdef STRATA_WITH_CUDA
  const bool gpu_support = true;
  auto gpus = strata::ListGpus();
  if (!gpus.ok()) {
    std::cerr << "list_devices: " << gpus.status() << "\n";
    return 1;
  }
  for (const strata::GpuInfo& g : *gpus) {
    strata::DeviceRow r;
    r.name = absl::StrCat("/job:localhost/replica:0/task:0/device:GPU:", g.ordinal);
    r.type = "GPU";
    r.memory_bytes = g.total_bytes;
    r.free_bytes = g.free_bytes;
    r.details = absl::StrCat(g.name, ", compute ", g.compute_major, ".", g.compute_minor, ", ",
                             g.multiprocessors, " SMs, PCI ", g.pci_bus_id);
    rows.push_back(std::move(r));
  }
  if (gpus->empty()) {
    note = absl::StrCat("no GPU: cudaGetDeviceCount said ", strata::CountGpus().why_none);
  }
#else
  const bool gpu_support = false;
  note = "GPUs not listed: this binary was built without CUDA (build with --config=cuda)";
#endif
  if (json) {
    std::cout << strata::FormatDeviceJson(rows, gpu_support, note);
  } else {
    std::cout << strata::FormatDeviceTable(rows, note);
  }
  return 0;
}
