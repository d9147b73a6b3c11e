// What a training run reports while it runs: JSON-lines metrics and the
// progress line (tools/trainer and fit::Fit write the same ones).
//
//   STRATA_ASSIGN_OR_RETURN(auto metrics, fit::MetricsWriter::Open("/tmp/run/metrics.jsonl"));
//   fit::ProgressLine progress(stderr, /*quiet=*/false, start, total, /*every=*/0, global_batch);
//   for (...) {
//     metrics->Step(step, loss, examples_per_sec, elapsed);  // {"step":12,"loss":0.43,...}
//     progress.Update(step, loss);                           // step 12/660  loss 0.4321  ...
//   }
//   metrics->Line(R"({"final":true,...})");
//
// The metrics file is appended to (a resumed run adds its lines; steps
// redone after a crash appear again) and flushed at most every 100 ms, and
// on Flush. The progress line is updated in place (carriage return, at
// most 10 times a second) on a terminal, and printed every `every` steps
// (0: about 20 lines per run) otherwise.
//
// Thread-safety: one thread. Ownership: the writer owns its file.
#ifndef STRATA_FIT_PROGRESS_H_
#define STRATA_FIT_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace strata {
namespace fit {

using Clock = std::chrono::steady_clock;

// Seconds in a clock duration.
double Seconds(Clock::duration d);

// A JSON number, or null for inf and nan (JSON has neither).
std::string JsonNumber(double v);

// Worker `worker`'s own file beside `path`: ".worker<i>" before the
// extension ("/tmp/trace.json" -> "/tmp/trace.worker1.json").
std::string WorkerPath(std::string path, int worker);

class MetricsWriter {
 public:
  // "" writes nothing. InvalidArgument naming --metrics_out if the file
  // cannot be opened for appending.
  static absl::StatusOr<std::unique_ptr<MetricsWriter>> Open(const std::string& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  // {"step":S,"loss":L,"examples_per_sec":R,"elapsed_sec":E}, plus each of
  // `arrays` as "name":[...] (the per-worker waits, fit/loop.h).
  void Step(int64_t step, double loss, double examples_per_sec, double elapsed,
            const std::vector<std::pair<std::string, std::vector<double>>>& arrays = {});
  // One line as given (a JSON object).
  void Line(const std::string& json);
  void Flush(Clock::time_point now = Clock::now());

 private:
  explicit MetricsWriter(FILE* f) : f_(f) {}
  FILE* const f_;
  Clock::time_point last_flush_ = Clock::now();
};

class ProgressLine {
 public:
  // Steps start+1 .. total of `batch` examples each, to `out` (nothing when
  // quiet or null).
  ProgressLine(FILE* out, bool quiet, int64_t start, int64_t total, int64_t every, int64_t batch);
  void Update(int64_t step, double loss);

 private:
  FILE* const out_;
  const bool tty_;
  const int64_t start_, total_, every_, batch_;
  const Clock::time_point t0_;
  Clock::time_point last_print_;
};

}  // namespace fit
}  // namespace strata

#endif  // STRATA_FIT_PROGRESS_H_
