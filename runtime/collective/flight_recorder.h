// FlightRecorder: an always-on ring of this process's last collectives
// (sequence number, op, group and instance, execution count, node name,
// dtype, shape, bytes, the training step, start, end, state), plus the step
// the process is in and what it is doing. When a collective waits too long,
// a task is lost or SIGUSR1 arrives, every reachable task sends its
// snapshot to the chief, which names the task that is behind
// (hang_diagnosis.h, hang_watchdog.h). PyTorch's recorder is off unless an
// environment variable is set; this one costs a lock and a few copies per
// collective (measured in collective_bench, BM_FlightRecorder*), so it is
// always on.
//
//   FlightRecorder& r = FlightRecorder::Process();
//   r.SetStep(12);
//   r.SetActivity("input pipeline");
//   uint64_t seq = r.Begin({"all-reduce", 1, 3, /*execution=*/11, "grad/AllReduce",
//                           "float", "[1024]", 4096});
//   ... the collective runs ...
//   r.End(seq, status);
//   FlightRecorderSnapshot s = r.Snapshot("/job:worker/replica:0/task:1");
//   std::cerr << FormatSnapshot(s);
//
// Thread-safety: every method may be called concurrently.
#ifndef STRATA_RUNTIME_COLLECTIVE_FLIGHT_RECORDER_H_
#define STRATA_RUNTIME_COLLECTIVE_FLIGHT_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "proto/flight_recorder.pb.h"

namespace strata {

// What Begin records of a collective.
struct CollectiveInfo {
  std::string op;  // "all-reduce", "all-gather", "broadcast"
  int group_key = 0;
  int instance_key = 0;
  uint64_t execution = 0;  // the k-th execution of (group, instance)
  std::string name;        // the op's node name
  std::string dtype;
  std::string shape;
  int64_t bytes = 0;
};

// The longest-running collective, for a watchdog.
struct RunningCollective {
  uint64_t seq = 0;
  absl::Duration waited;
  std::string description;  // DescribeRecord of it
};

class FlightRecorder {
 public:
  static constexpr size_t kDefaultCapacity = 1024;

  explicit FlightRecorder(size_t capacity = kDefaultCapacity);
  // The process's recorder (never destroyed).
  static FlightRecorder& Process();

  // Records a collective starting now; returns its sequence number.
  uint64_t Begin(CollectiveInfo info);
  // Records its end (a no-op once the ring has reused its slot).
  void End(uint64_t seq, const absl::Status& status);

  // The training step the process is in; -1 before the first.
  void SetStep(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  int64_t step() const { return step_.load(std::memory_order_relaxed); }
  // What the process is doing ("input pipeline", "step", "checkpoint"),
  // since now.
  void SetActivity(absl::string_view activity);

  // Wall-clock seconds during which at least one collective ran, up to the
  // last end (overlapping collectives count once): between two reads, a
  // worker's time in collectives.
  double completed_seconds() const;

  // The newest `max_records` records, oldest first, with ages relative to
  // now.
  FlightRecorderSnapshot Snapshot(const std::string& task, size_t max_records = 64) const;
  // The running collective that started first; nullopt when none runs.
  std::optional<RunningCollective> LongestRunning() const;

 private:
  struct Slot {
    uint64_t seq = 0;  // 0: empty
    CollectiveInfo info;
    int64_t step = -1;
    absl::Time start;
    absl::Time end;
    CollectiveRecord::State state = CollectiveRecord::STATE_UNSPECIFIED;
    std::string error;
  };
  CollectiveRecord ToRecord(const Slot& s, absl::Time now) const;

  std::atomic<int64_t> step_{-1};
  mutable Mutex mu_;
  std::vector<Slot> ring_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  double completed_seconds_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;        // collectives begun and not ended
  absl::Time busy_since_ ABSL_GUARDED_BY(mu_);  // when running_ became 1
  std::string activity_ ABSL_GUARDED_BY(mu_);
  absl::Time activity_since_ ABSL_GUARDED_BY(mu_);
};

// "all-reduce 'grad/AllReduce' float[1024] 4.0 KiB (group 1, instance 3,
// execution 11) of step 12".
std::string DescribeRecord(const CollectiveRecord& r);
// A readable dump: the task's step and activity, then one line per record.
std::string FormatSnapshot(const FlightRecorderSnapshot& s);

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_FLIGHT_RECORDER_H_
