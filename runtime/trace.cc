#include "runtime/trace.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace strata {

namespace {

constexpr char kStepsTrack[] = "steps";
constexpr char kCollectivesTrack[] = "collectives";

// JSON string contents (names are node names, but a user may name nodes
// anything).
std::string Escape(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

// Devices in the order a person expects: by name with the trailing index
// compared as a number, so CPU:2 comes before CPU:10.
bool DeviceBefore(const std::string& a, const std::string& b) {
  auto split = [](const std::string& d) {
    const size_t colon = d.rfind(':');
    int64_t index = -1;
    if (colon != std::string::npos && absl::SimpleAtoi(d.substr(colon + 1), &index)) {
      return std::make_pair(d.substr(0, colon), index);
    }
    return std::make_pair(d, int64_t{-1});
  };
  return split(a) < split(b);
}

// Microseconds with nanosecond resolution, as the format's "ts" and "dur".
std::string Micros(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", static_cast<double>(ns) / 1000.0);
  return buf;
}

}  // namespace

bool IsCollectiveOp(absl::string_view op) { return absl::StartsWith(op, "Collective"); }

int64_t StepTracer::NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void StepTracer::Record(absl::string_view node, absl::string_view op, absl::string_view device,
                        int64_t start_ns, int64_t end_ns, bool async) {
  TraceEvent e{std::string(node), std::string(op), std::string(device), start_ns, end_ns, async};
  MutexLock l(&mu_);
  events_.push_back(std::move(e));
}

void StepTracer::RecordSpan(absl::string_view name, int64_t start_ns, int64_t end_ns) {
  TraceEvent e{std::string(name), "", "", start_ns, end_ns, false};
  MutexLock l(&mu_);
  events_.push_back(std::move(e));
}

std::vector<TraceEvent> StepTracer::events() const {
  MutexLock l(&mu_);
  return events_;
}

size_t StepTracer::num_events() const {
  MutexLock l(&mu_);
  return events_.size();
}

std::string StepTracer::ToChromeTraceJson() const {
  std::vector<TraceEvent> events = this->events();

  // 1. Tracks (pids): steps, the devices in order, collectives.
  std::vector<std::string> devices;
  for (const TraceEvent& e : events) {
    if (!e.device.empty() && !IsCollectiveOp(e.op)) devices.push_back(e.device);
  }
  std::sort(devices.begin(), devices.end(), DeviceBefore);
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  std::map<std::string, int> pid_of;
  std::vector<std::string> track_names = {kStepsTrack};
  for (const std::string& d : devices) {
    pid_of[d] = static_cast<int>(track_names.size());
    track_names.push_back(d);
  }
  const int collectives_pid = static_cast<int>(track_names.size());
  track_names.push_back(kCollectivesTrack);
  auto track = [&](const TraceEvent& e) {
    if (e.device.empty()) return 0;
    if (IsCollectiveOp(e.op)) return collectives_pid;
    return pid_of[e.device];
  };

  // 2. Rows (tids) within a track: each event goes to the first row whose
  // last event has ended (events by start time), so no row overlaps itself.
  std::sort(events.begin(), events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return std::tie(a.start_ns, a.end_ns) < std::tie(b.start_ns, b.end_ns);
  });
  const int64_t origin = events.empty() ? 0 : events.front().start_ns;
  std::vector<std::vector<int64_t>> row_end(track_names.size());
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[";
  bool first = true;
  auto append = [&](const std::string& json) {
    if (!first) out += ",\n";
    first = false;
    out += json;
  };
  for (const TraceEvent& e : events) {
    const int pid = track(e);
    std::vector<int64_t>& rows = row_end[pid];
    size_t row = 0;
    while (row < rows.size() && rows[row] > e.start_ns) ++row;
    if (row == rows.size()) rows.push_back(0);
    rows[row] = std::max(e.end_ns, e.start_ns);
    std::string args;
    if (!e.op.empty()) {
      args = absl::StrCat(",\"args\":{\"op\":\"", Escape(e.op), "\",\"device\":\"", Escape(e.device),
                          "\"", e.async ? ",\"async\":true" : "", "}");
    }
    append(absl::StrCat("{\"name\":\"", Escape(e.name), "\",\"cat\":\"",
                        e.op.empty() ? "step" : (pid == collectives_pid ? "collective" : "op"),
                        "\",\"ph\":\"X\",\"ts\":", Micros(e.start_ns - origin),
                        ",\"dur\":", Micros(std::max<int64_t>(0, e.end_ns - e.start_ns)),
                        ",\"pid\":", pid, ",\"tid\":", row, args, "}"));
  }

  // 3. Names and order of the tracks and rows (metadata events).
  for (size_t pid = 0; pid < track_names.size(); ++pid) {
    append(absl::StrCat("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":", pid,
                        ",\"tid\":0,\"args\":{\"name\":\"", Escape(track_names[pid]), "\"}}"));
    append(absl::StrCat("{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":", pid,
                        ",\"tid\":0,\"args\":{\"sort_index\":", pid, "}}"));
    const char* what = pid == 0 ? "steps" : (static_cast<int>(pid) == collectives_pid ? "in flight" : "ops");
    for (size_t row = 0; row < row_end[pid].size(); ++row) {
      append(absl::StrCat("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":", pid, ",\"tid\":", row,
                          ",\"args\":{\"name\":\"", what, row == 0 ? "" : absl::StrCat(" ", row + 1),
                          "\"}}"));
    }
  }
  // ts 0 on the steady clock (CLOCK_MONOTONIC, shared by the processes of
  // one host): traces of several workers of one host line up with it.
  out += absl::StrCat("],\"otherData\":{\"steady_clock_origin_ns\":", origin, "}}\n");
  return out;
}

absl::Status StepTracer::WriteChromeTrace(const std::string& path) const {
  const std::string json = ToChromeTraceJson();
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace file ", path, ": cannot open for writing: ", std::strerror(errno)));
  }
  const size_t written = std::fwrite(json.data(), 1, json.size(), f);
  const bool closed = std::fclose(f) == 0;
  if (written != json.size() || !closed) {
    return absl::InvalidArgumentError(absl::StrCat("trace file ", path, ": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace strata
