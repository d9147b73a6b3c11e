// HangWatchdog: names the task that holds a cluster up, by default. Every
// task runs one beside its collective executor (MultiWorkerMirroredStrategy
// does). It watches this process's flight recorder (flight_recorder.h):
// when a collective has run longer than `stall_threshold` (the heartbeat
// timeout), or SIGUSR1 arrives, it asks for a diagnosis through the
// cluster's key-value store; every task's watchdog answers with its
// recorder's snapshot, and rank 0 (the chief) prints one diagnosis
// (hang_diagnosis.h): which task is behind, at which step, before which
// collective, and what it was last doing. A task whose process is stuck
// still answers: the watchdog's threads are its own.
//
//   HangWatchdogOptions o;
//   o.store = coordination_client;            // the cluster's key-value store
//   o.key_prefix = "mwms-2222-<fingerprint>/diag";
//   o.rank = 1; o.task_names = {...};          // by rank
//   o.stall_threshold = heartbeat_timeout;
//   std::unique_ptr<HangWatchdog> w = HangWatchdog::Start(o);
//   HangWatchdog::InstallSignalHandler();      // SIGUSR1: dump + diagnosis
//
// Protocol (keys under key_prefix; the store's keys are insert-once): a
// request is key "request/<n>" = "<task>\n<reason>" (the first of
// concurrent requests wins, the others find it taken); every task answers
// with "<n>/<rank>" = its snapshot (serialized proto); rank 0 gathers the
// answers for up to `answer_timeout` and prints. At most `max_diagnoses`
// per cluster; one per stalled collective.
//
// When the cluster fails (a lost task, a failed collective), the store's
// waits end at once, so the protocol above cannot run; instead
// OnClusterError has every task insert its snapshot at "at_error/<rank>"
// (inserts still work) and the chief, which hosts the store, reads them
// without waiting through `peek` and prints one diagnosis of the error: the
// tasks that did not answer (the lost one) and what every other was doing.
// A task still there answers within milliseconds of the error, a lost one
// never: the chief stops gathering once `error_quiet_period` passed without
// a new answer (at most `error_gather_timeout` in all), so a lost task holds
// the cluster's exit up by the quiet period only.
//
// Thread-safety: Request may be called from any thread. Ownership: the
// store and the recorder must outlive the watchdog; the destructor stops
// its threads (within about a second).
#ifndef STRATA_RUNTIME_COLLECTIVE_HANG_WATCHDOG_H_
#define STRATA_RUNTIME_COLLECTIVE_HANG_WATCHDOG_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "base/env.h"
#include "base/mutex.h"
#include "runtime/collective/flight_recorder.h"
#include "runtime/collective/hang_diagnosis.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {

struct HangWatchdogOptions {
  KeyValueStore* store = nullptr;  // not owned
  std::string key_prefix;
  int rank = 0;
  std::vector<std::string> task_names;  // by rank; rank 0 prints
  FlightRecorder* recorder = nullptr;   // null: FlightRecorder::Process()
  absl::Duration stall_threshold = absl::Seconds(10);
  absl::Duration answer_timeout = absl::Seconds(3);
  absl::Duration poll_interval = absl::Milliseconds(200);
  // How long each wait for a request lasts (one call to the store each).
  absl::Duration request_wait = absl::Seconds(5);
  int max_diagnoses = 10;
  // Where the chief's diagnosis goes (default: stderr).
  std::function<void(const std::string&)> print;
  // The chief's non-blocking read of the store that works after the
  // cluster's error (NotFound while a key is absent); null on the others
  // (then OnClusterError only answers).
  std::function<absl::StatusOr<std::string>(const std::string& key)> peek;
  absl::Duration error_gather_timeout = absl::Seconds(2);
  absl::Duration error_quiet_period = absl::Milliseconds(500);
  // The clock of the error's gathering (null: Env::Default()).
  Env* env = nullptr;
};

class HangWatchdog {
 public:
  static std::unique_ptr<HangWatchdog> Start(HangWatchdogOptions options);
  ~HangWatchdog();
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

  // Asks the cluster for a diagnosis; returns at once.
  void Request(const std::string& reason);

  // SIGUSR1, from now on: the process prints its recorder to stderr and
  // every watchdog in it asks for a diagnosis. Idempotent.
  static void InstallSignalHandler();

  // The cluster failed with `error`: answers with this task's snapshot
  // (taken now: call it before aborting the collectives) and, on the chief
  // (options.peek), gathers the others' and prints one diagnosis (file
  // comment), unless no task that answered had started training (an error
  // at start-up). Returns at once; the first call only.
  void OnClusterError(const absl::Status& error);
  // Waits up to `timeout` for OnClusterError's work to finish (before the
  // process stops its store client); at once if it was never called.
  void AwaitClusterErrorReport(absl::Duration timeout);

 private:
  explicit HangWatchdog(HangWatchdogOptions options);
  void MonitorLoop();
  void AnswerLoop();
  // OnClusterError's thread; `snapshot` is this task's, serialized.
  void ReportClusterError(const absl::Status& error, const std::string& snapshot);
  // Rank 0: the tasks' answers at the cluster's error (file comment).
  std::vector<TaskReport> GatherErrorReports(const std::string& prefix);
  // Rank 0: gathers diagnosis n's answers and prints it.
  void Diagnose(int n, const std::string& request);
  bool Stopping() const;
  void SleepFor(absl::Duration d);

  const HangWatchdogOptions options_;
  FlightRecorder* const recorder_;
  std::atomic<int> next_{0};  // the diagnosis the answer loop waits for
  mutable Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int requests_ ABSL_GUARDED_BY(mu_) = 0;
  bool error_started_ ABSL_GUARDED_BY(mu_) = false;
  bool error_done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread monitor_;
  std::thread answerer_;
  std::thread error_reporter_;  // OnClusterError's
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_HANG_WATCHDOG_H_
