#include "tools/list_devices_lib.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace strata {

namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// MemAvailable in bytes, or -1 where /proc/meminfo does not say.
int64_t AvailableHostBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

}  // namespace

DeviceRow HostCpuRow() {
  DeviceRow r;
  r.name = "/job:localhost/replica:0/task:0/device:CPU:0";
  r.type = "CPU";
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  r.memory_bytes = pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
  r.free_bytes = AvailableHostBytes();
  const unsigned cores = std::thread::hardware_concurrency();
  r.details = absl::StrCat(cores, cores == 1 ? " core" : " cores");
  return r;
}

std::string HumanBytes(int64_t bytes) {
  if (bytes < 0) return "-";
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return absl::StrFormat("%.1f %s", v, kUnits[u]);
}

std::string FormatDeviceTable(const std::vector<DeviceRow>& rows, const std::string& note) {
  const std::vector<std::string> header = {"DEVICE", "TYPE", "MEMORY", "FREE", "DETAILS"};
  std::vector<std::vector<std::string>> cells = {header};
  for (const DeviceRow& r : rows) {
    cells.push_back(
        {r.name, r.type, HumanBytes(r.memory_bytes), HumanBytes(r.free_bytes), r.details});
  }
  std::vector<size_t> width(header.size(), 0);
  for (const auto& row : cells) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : cells) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      // Sizes align right, text left; the last column is not padded.
      const bool right = c == 2 || c == 3;
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c + 1 == row.size()) {
        line += row[c];
      } else {
        line += right ? pad + row[c] : row[c] + pad;
        line += "  ";
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  }
  if (!note.empty()) absl::StrAppend(&out, note, "\n");
  return out;
}

std::string FormatDeviceJson(const std::vector<DeviceRow>& rows, bool gpu_support,
                             const std::string& note) {
  std::string out = absl::StrCat("{\"gpu_support\": ", gpu_support ? "true" : "false",
                                 ", \"note\": ", JsonString(note), ", \"devices\": [");
  for (size_t i = 0; i < rows.size(); ++i) {
    const DeviceRow& r = rows[i];
    absl::StrAppend(&out, i == 0 ? "" : ", ", "{\"name\": ", JsonString(r.name),
                    ", \"type\": ", JsonString(r.type), ", \"memory_bytes\": ", r.memory_bytes,
                    ", \"free_bytes\": ", r.free_bytes, ", \"details\": ", JsonString(r.details),
                    "}");
  }
  return out + "]}\n";
}

}  // namespace strata
