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
#include "base/mutex.h"
#include "runtime/collective/flight_recorder.h"
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

 private:
  explicit HangWatchdog(HangWatchdogOptions options);
  void MonitorLoop();
  void AnswerLoop();
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
  std::thread monitor_;
  std::thread answerer_;
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_HANG_WATCHDOG_H_
