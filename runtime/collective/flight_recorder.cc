#include "runtime/collective/flight_recorder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace strata {

FlightRecorder::FlightRecorder(size_t capacity)
    : ring_(capacity == 0 ? 1 : capacity), activity_since_(absl::Now()) {}

FlightRecorder& FlightRecorder::Process() {
  static FlightRecorder* recorder = new FlightRecorder();
  return *recorder;
}

uint64_t FlightRecorder::Begin(CollectiveInfo info) {
  const absl::Time now = absl::Now();
  MutexLock l(&mu_);
  const uint64_t seq = next_seq_++;
  if (running_++ == 0) busy_since_ = now;
  Slot& s = ring_[seq % ring_.size()];
  // A slot still running when the ring comes round again (over a thousand
  // collectives in flight) stops counting as running.
  if (s.seq != 0 && s.state == CollectiveRecord::RUNNING) --running_;
  s.seq = seq;
  s.info = std::move(info);
  s.step = step();
  s.start = now;
  s.end = absl::InfinitePast();
  s.state = CollectiveRecord::RUNNING;
  s.error.clear();
  return seq;
}

void FlightRecorder::End(uint64_t seq, const absl::Status& status) {
  const absl::Time now = absl::Now();
  MutexLock l(&mu_);
  Slot& s = ring_[seq % ring_.size()];
  if (s.seq != seq || s.state != CollectiveRecord::RUNNING) return;
  s.end = now;
  if (--running_ == 0) completed_seconds_ += absl::ToDoubleSeconds(now - busy_since_);
  s.state = status.ok() ? CollectiveRecord::DONE : CollectiveRecord::FAILED;
  if (!status.ok()) s.error = std::string(status.message().substr(0, 512));
}

double FlightRecorder::completed_seconds() const {
  MutexLock l(&mu_);
  return completed_seconds_;
}

void FlightRecorder::SetActivity(absl::string_view activity) {
  const absl::Time now = absl::Now();
  MutexLock l(&mu_);
  if (activity_ == activity) return;
  activity_.assign(activity.data(), activity.size());
  activity_since_ = now;
}

CollectiveRecord FlightRecorder::ToRecord(const Slot& s, absl::Time now) const {
  CollectiveRecord r;
  r.set_seq(s.seq);
  r.set_op(s.info.op);
  r.set_group_key(s.info.group_key);
  r.set_instance_key(s.info.instance_key);
  r.set_execution(s.info.execution);
  r.set_name(s.info.name);
  r.set_dtype(s.info.dtype);
  r.set_shape(s.info.shape);
  r.set_bytes(s.info.bytes);
  r.set_step(s.step);
  r.set_state(s.state);
  r.set_started_ago_seconds(absl::ToDoubleSeconds(now - s.start));
  if (s.state != CollectiveRecord::RUNNING) {
    r.set_duration_seconds(absl::ToDoubleSeconds(s.end - s.start));
  }
  r.set_error(s.error);
  return r;
}

FlightRecorderSnapshot FlightRecorder::Snapshot(const std::string& task, size_t max_records) const {
  const absl::Time now = absl::Now();
  FlightRecorderSnapshot out;
  out.set_task(task);
  out.set_step(step());
  MutexLock l(&mu_);
  out.set_activity(activity_);
  out.set_activity_age_seconds(absl::ToDoubleSeconds(now - activity_since_));
  out.set_recorded(next_seq_ - 1);
  const uint64_t n = std::min<uint64_t>({max_records, ring_.size(), next_seq_ - 1});
  for (uint64_t seq = next_seq_ - n; seq < next_seq_; ++seq) {
    const Slot& s = ring_[seq % ring_.size()];
    if (s.seq == seq) *out.add_records() = ToRecord(s, now);
  }
  return out;
}

std::optional<RunningCollective> FlightRecorder::LongestRunning() const {
  const absl::Time now = absl::Now();
  MutexLock l(&mu_);
  const Slot* oldest = nullptr;
  for (const Slot& s : ring_) {
    if (s.seq != 0 && s.state == CollectiveRecord::RUNNING &&
        (oldest == nullptr || s.start < oldest->start)) {
      oldest = &s;
    }
  }
  if (oldest == nullptr) return std::nullopt;
  return RunningCollective{oldest->seq, now - oldest->start,
                           DescribeRecord(ToRecord(*oldest, now))};
}

namespace {

std::string Bytes(int64_t b) {
  if (b < 1024) return absl::StrCat(b, " B");
  if (b < (1 << 20)) return absl::StrFormat("%.1f KiB", b / 1024.0);
  return absl::StrFormat("%.1f MiB", b / 1048576.0);
}

}  // namespace

std::string DescribeRecord(const CollectiveRecord& r) {
  return absl::StrCat(r.op(), " '", r.name(), "' ", r.dtype(), r.shape(), " ", Bytes(r.bytes()),
                      " (group ", r.group_key(), ", instance ", r.instance_key(), ", execution ",
                      r.execution(), ") of step ", r.step());
}

std::string FormatSnapshot(const FlightRecorderSnapshot& s) {
  std::string out = absl::StrFormat(
      "flight recorder of %s: at step %d, %s for %.1f s; its last %d of %d collectives:\n",
      s.task(), s.step(),
      s.activity().empty() ? "no activity recorded" : absl::StrCat("\"", s.activity(), "\""),
      s.activity_age_seconds(), s.records_size(), s.recorded());
  for (const CollectiveRecord& r : s.records()) {
    std::string state;
    switch (r.state()) {
      case CollectiveRecord::RUNNING:
        state = absl::StrFormat("RUNNING for %.3f s", r.started_ago_seconds());
        break;
      case CollectiveRecord::DONE:
        state = absl::StrFormat("done in %.6f s, %.1f s ago", r.duration_seconds(),
                                r.started_ago_seconds());
        break;
      case CollectiveRecord::FAILED:
        // The error in full is the task's own error line; its start here.
        state = absl::StrFormat("FAILED after %.3f s: %s%s", r.duration_seconds(),
                                r.error().substr(0, 100), r.error().size() > 100 ? "..." : "");
        break;
      default:
        state = "?";
    }
    absl::StrAppend(&out, "  #", r.seq(), " ", DescribeRecord(r), ": ", state, "\n");
  }
  return out;
}

}  // namespace strata
