// DiagnoseHang: from every task's flight recorder snapshot
// (flight_recorder.h), which task holds the cluster up and where. The
// chief prints it when a collective waits past the heartbeat timeout, a
// task is lost or a task gets SIGUSR1 (hang_watchdog.h):
//
//   strata: hang diagnosis #1, requested by /job:worker/replica:0/task:0 (all-reduce ...
//   waited 10.2 s):
//     behind: /job:worker/replica:0/task:1 at step 12 has not started all-reduce
//       'grad/AllReduce' float[1024] 4.0 KiB (group 1, instance 3, execution 11) of step 12,
//       which 1 task waits in for 10.2 s; it is in "input pipeline" for 10.3 s; its last
//       collective: all-reduce ... of step 11, done 10.4 s ago
//     waiting: /job:worker/replica:0/task:0 at step 12 in all-reduce ... for 10.2 s
//
// The collective everyone is matched against is the one waited in longest;
// executions match across tasks by (group, instance, execution count), as
// the executor matches them. A task behind that waits in another
// collective the others have not started is a mismatch (the ranks issue
// different collectives: a model-code bug) and is reported naming both
// tasks and both collectives. Tasks that did not answer are named with the
// reason.
//
// Thread-safety: a pure function.
#ifndef STRATA_RUNTIME_COLLECTIVE_HANG_DIAGNOSIS_H_
#define STRATA_RUNTIME_COLLECTIVE_HANG_DIAGNOSIS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "proto/flight_recorder.pb.h"

namespace strata {

struct TaskReport {
  std::string task;
  // nullopt: the task did not answer (`missing` says why).
  std::optional<FlightRecorderSnapshot> snapshot;
  std::string missing;
};

// `number` counts diagnoses in this cluster; `requested_by` and `reason`
// say what asked for it. Lines end with '\n'.
std::string DiagnoseHang(const std::vector<TaskReport>& tasks, int number,
                         absl::string_view requested_by, absl::string_view reason);

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_HANG_DIAGNOSIS_H_
