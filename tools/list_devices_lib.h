// What tools/list_devices prints: one row per device (the host CPU and each
// GPU) with its memory, as an aligned table or as JSON. Discovery lives
// elsewhere (runtime/gpu/gpu_info.h for GPUs); this formats, so that the
// output is tested on every machine.
//
//   std::vector<DeviceRow> rows = {HostCpuRow()};
//   rows.push_back(DeviceRow{"/job:localhost/replica:0/task:0/device:GPU:0", "GPU",
//                            80 << 30, 79 << 30, "NVIDIA H100, compute 9.0"});
//   std::cout << FormatDeviceTable(rows, "");
//   std::cout << FormatDeviceJson(rows, /*gpu_support=*/true, "");
//
// Thread-safety: pure functions. Ownership: plain values.
#ifndef STRATA_TOOLS_LIST_DEVICES_LIB_H_
#define STRATA_TOOLS_LIST_DEVICES_LIB_H_

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

struct DeviceRow {
  std::string name;          // full device name
  std::string type;          // "CPU" or "GPU"
  int64_t memory_bytes = 0;  // total
  int64_t free_bytes = -1;   // -1: unknown
  std::string details;       // "16 cores", "NVIDIA H200, compute 9.0, 132 SMs"
};

// The host as device CPU:0 of /job:localhost: physical memory, available
// memory (/proc/meminfo's MemAvailable) and the core count.
DeviceRow HostCpuRow();

// "1.5 GiB", "512.0 MiB", "900 B"; "-" for a negative (unknown) size.
std::string HumanBytes(int64_t bytes);

// A header and one aligned row per device, then `note` on its own line when
// not empty (why there is no GPU, say).
std::string FormatDeviceTable(const std::vector<DeviceRow>& rows, const std::string& note);

// {"gpu_support": true, "note": "...", "devices": [{"name": ..., "type": ...,
// "memory_bytes": ..., "free_bytes": ..., "details": ...}, ...]}, one line,
// strings escaped.
std::string FormatDeviceJson(const std::vector<DeviceRow>& rows, bool gpu_support,
                             const std::string& note);

}  // namespace strata

#endif  // STRATA_TOOLS_LIST_DEVICES_LIB_H_
