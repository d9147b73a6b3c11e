#include "fit/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace strata {
namespace fit {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string JsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.7g", v);
  return buf;
}

std::string WorkerPath(std::string path, int worker) {
  const size_t slash = path.find_last_of('/'), dot = path.find_last_of('.');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  path.insert(has_ext ? dot : path.size(), absl::StrCat(".worker", worker));
  return path;
}

absl::StatusOr<std::unique_ptr<MetricsWriter>> MetricsWriter::Open(const std::string& path) {
  if (path.empty()) return std::unique_ptr<MetricsWriter>(new MetricsWriter(nullptr));
  FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_out=", path, ": cannot open for appending: ", std::strerror(errno)));
  }
  return std::unique_ptr<MetricsWriter>(new MetricsWriter(f));
}

MetricsWriter::~MetricsWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

void MetricsWriter::Step(int64_t step, double loss, double examples_per_sec, double elapsed,
                         const std::vector<std::pair<std::string, std::vector<double>>>& arrays) {
  if (f_ == nullptr) return;
  std::string extra;
  for (const auto& [name, values] : arrays) {
    absl::StrAppend(&extra, ",\"", name, "\":[");
    for (size_t i = 0; i < values.size(); ++i) absl::StrAppend(&extra, i ? "," : "", JsonNumber(values[i]));
    extra += "]";
  }
  std::fprintf(f_, "{\"step\":%lld,\"loss\":%s,\"examples_per_sec\":%s,\"elapsed_sec\":%s%s}\n",
               static_cast<long long>(step), JsonNumber(loss).c_str(), JsonNumber(examples_per_sec).c_str(),
               JsonNumber(elapsed).c_str(), extra.c_str());
  const Clock::time_point now = Clock::now();
  if (now - last_flush_ > std::chrono::milliseconds(100)) Flush(now);
}

void MetricsWriter::Line(const std::string& json) {
  if (f_ == nullptr) return;
  std::fprintf(f_, "%s\n", json.c_str());
}

void MetricsWriter::Flush(Clock::time_point now) {
  if (f_ != nullptr) std::fflush(f_);
  last_flush_ = now;
}

ProgressLine::ProgressLine(FILE* out, bool quiet, int64_t start, int64_t total, int64_t every, int64_t batch)
    : out_(quiet ? nullptr : out),
      tty_(out != nullptr && isatty(fileno(out))),
      start_(start),
      total_(total),
      every_(every > 0 ? every : std::max<int64_t>(1, (total - start) / 20)),
      batch_(batch),
      t0_(Clock::now()) {}

void ProgressLine::Update(int64_t step, double loss) {
  if (out_ == nullptr) return;
  const Clock::time_point now = Clock::now();
  const bool last = step == total_;
  if (tty_) {
    if (!last && now - last_print_ < std::chrono::milliseconds(100)) return;
  } else if (!last && step != start_ + 1 && step % every_ != 0) {
    return;
  }
  last_print_ = now;
  const double elapsed = Seconds(now - t0_);
  const double done = static_cast<double>(step - start_);
  const double rate = elapsed > 0 ? done * batch_ / elapsed : 0;
  const double left = done > 0 ? elapsed / done * static_cast<double>(total_ - step) : 0;
  // On a terminal: back to the line's start, and clear what a longer
  // previous line left behind.
  std::fprintf(out_, "%sstep %lld/%lld  loss %.4f  %.0f examples/s  %.1f s left%s", tty_ ? "\r" : "",
               static_cast<long long>(step), static_cast<long long>(total_), loss, rate, left,
               tty_ ? (last ? "\x1b[K\n" : "\x1b[K") : "\n");
  std::fflush(out_);
}

}  // namespace fit
}  // namespace strata
