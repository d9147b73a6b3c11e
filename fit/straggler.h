// StragglerDetector: names the worker the others consistently wait for.
// Each step the training loop learns, for every worker and the previous
// step, its time in cross-worker collectives and its time waiting for a
// CPU (runnable, not running: the kernel's run-queue delay of the threads
// that do the step, base/run_queue.h), both travelling with the loss's all-reduce
// (fit/loop.h). A worker slow in its own work (a slower device, a slow
// disk under its input) reaches each collective last, so it waits there
// least while the others wait for it; a worker starved of CPU (a hog on
// its cores, a cgroup quota) also shows its own run-queue delay, which
// matters where collectives need every worker's CPU and all of them wait
// alike. A worker's lateness in a step is how much less it waited in
// collectives than the others' median, plus how much more it waited for a
// CPU than theirs. Over a window of steps, a worker is a straggler when
// it was the latest, by at least 5% of the step's time and 1 ms, in at least 80%
// of them; it is reported once per window:
//
//   StragglerDetector d(/*num_workers=*/3);
//   std::optional<std::string> r = d.Add(waits, cpu_waits, step_seconds, task_names);
//   // "straggler: /job:worker/replica:0/task:1 holds the others up: it was
//   //  late by 41.0 ms per step (48% of the step; it waited 30.2 ms for a
//   //  CPU) in 50 of the last 50 steps"
//
// Thread-safety: one thread.
#ifndef STRATA_FIT_STRAGGLER_H_
#define STRATA_FIT_STRAGGLER_H_

#include <optional>
#include <string>
#include <vector>

namespace strata {
namespace fit {

class StragglerDetector {
 public:
  explicit StragglerDetector(int num_workers, int window = 50);

  // One step: each worker's wait in collectives and for a CPU (seconds,
  // by worker) and the step's wall time. A report at the end of a window
  // that has a straggler.
  std::optional<std::string> Add(const std::vector<double>& waits,
                                 const std::vector<double>& cpu_waits, double step_seconds,
                                 const std::vector<std::string>& names);

 private:
  const int num_workers_;
  const int window_;
  int steps_ = 0;
  std::vector<int> slowest_;       // steps each worker was the latest
  std::vector<double> gap_sum_;    // its lateness in those steps, summed
  std::vector<double> share_sum_;  // that lateness over the step time, summed
  std::vector<double> cpu_sum_;    // its own CPU wait in those steps, summed
};

}  // namespace fit
}  // namespace strata

#endif  // STRATA_FIT_STRAGGLER_H_
