#include "fit/straggler.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace strata {
namespace fit {
namespace {

constexpr double kMinLatenessSeconds = 1e-3;

// The median of `v` without element `skip`.
double MedianWithout(const std::vector<double>& v, int skip) {
  std::vector<double> others;
  for (int i = 0; i < static_cast<int>(v.size()); ++i) {
    if (i != skip) others.push_back(v[i]);
  }
  std::nth_element(others.begin(), others.begin() + others.size() / 2, others.end());
  return others[others.size() / 2];
}

}  // namespace

StragglerDetector::StragglerDetector(int num_workers, int window)
    : num_workers_(num_workers),
      window_(std::max(window, 1)),
      slowest_(static_cast<size_t>(std::max(num_workers, 0)), 0),
      gap_sum_(slowest_.size(), 0),
      share_sum_(slowest_.size(), 0),
      cpu_sum_(slowest_.size(), 0) {}

std::optional<std::string> StragglerDetector::Add(const std::vector<double>& waits,
                                                  const std::vector<double>& cpu_waits,
                                                  double step_seconds,
                                                  const std::vector<std::string>& names) {
  if (num_workers_ < 2 || static_cast<int>(waits.size()) != num_workers_ ||
      static_cast<int>(cpu_waits.size()) != num_workers_ || !(step_seconds > 0)) {
    return std::nullopt;
  }
  int latest = 0;
  double lateness = -1;
  for (int i = 0; i < num_workers_; ++i) {
    const double l = std::max(0.0, MedianWithout(waits, i) - waits[i]) +
                     std::max(0.0, cpu_waits[i] - MedianWithout(cpu_waits, i));
    if (l > lateness) {
      lateness = l;
      latest = i;
    }
  }
  // Late by a share of the step, and by enough to matter: on steps of a
  // fraction of a millisecond the chief's own reporting alone is 10-20%.
  if (lateness >= std::max(0.05 * step_seconds, kMinLatenessSeconds)) {
    ++slowest_[latest];
    gap_sum_[latest] += lateness;
    share_sum_[latest] += lateness / step_seconds;
    cpu_sum_[latest] += cpu_waits[latest];
  }
  if (++steps_ < window_) return std::nullopt;
  std::optional<std::string> report;
  for (int i = 0; i < num_workers_; ++i) {
    if (slowest_[i] * 5 >= window_ * 4) {
      report = absl::StrFormat(
          "straggler: %s holds the others up: it was late by %.1f ms per step (%.0f%% of the "
          "step; it waited %.1f ms for a CPU) in %d of the last %d steps",
          i < static_cast<int>(names.size()) ? names[i] : absl::StrFormat("worker %d", i),
          1e3 * gap_sum_[i] / slowest_[i], 100 * share_sum_[i] / slowest_[i],
          1e3 * cpu_sum_[i] / slowest_[i], slowest_[i], window_);
    }
  }
  steps_ = 0;
  std::fill(slowest_.begin(), slowest_.end(), 0);
  std::fill(gap_sum_.begin(), gap_sum_.end(), 0);
  std::fill(share_sum_.begin(), share_sum_.end(), 0);
  std::fill(cpu_sum_.begin(), cpu_sum_.end(), 0);
  return report;
}

}  // namespace fit
}  // namespace strata
