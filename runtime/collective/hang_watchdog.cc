#include "runtime/collective/hang_watchdog.h"

#include <signal.h>

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "runtime/collective/hang_diagnosis.h"

namespace strata {
namespace {

// SIGUSR1s received; the handler only counts (async-signal-safe).
std::atomic<uint64_t> g_signals{0};

void OnSignal(int) { g_signals.fetch_add(1, std::memory_order_relaxed); }

// Snapshots larger than this are cut to their newest records (the store
// takes values up to 64 KiB).
constexpr size_t kMaxAnswerBytes = 56 << 10;

std::string Serialize(FlightRecorderSnapshot s) {
  std::string out = s.SerializeAsString();
  while (out.size() > kMaxAnswerBytes && s.records_size() > 0) {
    s.mutable_records()->erase(s.mutable_records()->begin(),
                               s.mutable_records()->begin() + (s.records_size() + 1) / 2);
    out = s.SerializeAsString();
  }
  return out;
}

}  // namespace

std::unique_ptr<HangWatchdog> HangWatchdog::Start(HangWatchdogOptions options) {
  std::unique_ptr<HangWatchdog> w(new HangWatchdog(std::move(options)));
  w->monitor_ = std::thread([p = w.get()] { p->MonitorLoop(); });
  w->answerer_ = std::thread([p = w.get()] { p->AnswerLoop(); });
  return w;
}

HangWatchdog::HangWatchdog(HangWatchdogOptions options)
    : options_(std::move(options)),
      recorder_(options_.recorder != nullptr ? options_.recorder : &FlightRecorder::Process()) {}

HangWatchdog::~HangWatchdog() {
  {
    MutexLock l(&mu_);
    stop_ = true;
  }
  if (monitor_.joinable()) monitor_.join();
  if (answerer_.joinable()) answerer_.join();
  if (error_reporter_.joinable()) error_reporter_.join();
}

void HangWatchdog::OnClusterError(const absl::Status& error) {
  MutexLock l(&mu_);
  if (error_started_ || stop_) return;
  error_started_ = true;
  // Now, before the collectives are aborted: what this task was doing.
  const std::string& me = options_.task_names.at(static_cast<size_t>(options_.rank));
  error_reporter_ = std::thread([this, error, snapshot = Serialize(recorder_->Snapshot(me))] {
    ReportClusterError(error, snapshot);
  });
}

void HangWatchdog::AwaitClusterErrorReport(absl::Duration timeout) {
  MutexLock l(&mu_);
  if (!error_started_) return;
  mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return error_done_; },
                       timeout);
}

std::vector<TaskReport> HangWatchdog::GatherErrorReports(const std::string& prefix) {
  Env* env = EnvOrDefault(options_.env);
  std::vector<TaskReport> reports(options_.task_names.size());
  const absl::Time start = env->Now();
  absl::Time last_answer = start;
  for (;;) {
    bool all = true;
    for (size_t r = 0; r < reports.size(); ++r) {
      if (reports[r].snapshot.has_value()) continue;
      reports[r].task = options_.task_names[r];
      absl::StatusOr<std::string> answer = options_.peek(absl::StrCat(prefix, r));
      FlightRecorderSnapshot s;
      if (answer.ok() && s.ParseFromString(*answer)) {
        reports[r].snapshot = std::move(s);
        last_answer = env->Now();
      } else {
        all = false;
        reports[r].missing = answer.ok() ? "its answer is not a flight recorder snapshot" : "";
      }
    }
    const absl::Time now = env->Now();
    if (all || Stopping() || now - start >= options_.error_gather_timeout ||
        now - last_answer >= options_.error_quiet_period) {
      break;
    }
    env->SleepFor(absl::Milliseconds(20));
  }
  const std::string none =
      absl::StrFormat("no answer within %.1f s of the error: it failed, was lost or is cut off",
                      absl::ToDoubleSeconds(env->Now() - start));
  for (TaskReport& t : reports) {
    if (!t.snapshot.has_value() && t.missing.empty()) t.missing = none;
  }
  return reports;
}

void HangWatchdog::ReportClusterError(const absl::Status& error, const std::string& snapshot) {
  const std::string prefix = absl::StrCat(options_.key_prefix, "/at_error/");
  (void)options_.store->Insert(absl::StrCat(prefix, options_.rank), snapshot);
  if (options_.rank == 0 && options_.peek) {
    std::vector<TaskReport> reports = GatherErrorReports(prefix);
    // Nothing to say when no task that answered has started training (an
    // error at start-up, such as a bad flag, says it all).
    bool started = false;
    for (const TaskReport& t : reports) {
      if (!t.snapshot.has_value()) continue;
      started = started || t.snapshot->step() >= 0 || t.snapshot->records_size() > 0;
    }
    if (started) {
      const std::string text =
          DiagnoseHang(reports, next_.load() + 1, "the cluster's error", error.message());
      if (options_.print) {
        options_.print(text);
      } else {
        std::fprintf(stderr, "%s", text.c_str());
      }
    }
  }
  MutexLock l(&mu_);
  error_done_ = true;
}

void HangWatchdog::InstallSignalHandler() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
}

bool HangWatchdog::Stopping() const {
  MutexLock l(&mu_);
  return stop_;
}

void HangWatchdog::SleepFor(absl::Duration d) {
  MutexLock l(&mu_);
  mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; }, d);
}

void HangWatchdog::Request(const std::string& reason) {
  {
    MutexLock l(&mu_);
    if (requests_ >= options_.max_diagnoses) return;
    ++requests_;
  }
  const int n = next_.load();
  const std::string me = options_.task_names.at(static_cast<size_t>(options_.rank));
  // AlreadyExists: another task asked first; its diagnosis covers this.
  (void)options_.store->Insert(absl::StrCat(options_.key_prefix, "/request/", n),
                               absl::StrCat(me, "\n", reason));
}

void HangWatchdog::MonitorLoop() {
  uint64_t signals_seen = g_signals.load();
  uint64_t reported_seq = 0;
  const std::string& me = options_.task_names.at(static_cast<size_t>(options_.rank));
  while (!Stopping()) {
    SleepFor(options_.poll_interval);
    if (Stopping()) return;
    const uint64_t signals = g_signals.load();
    if (signals != signals_seen) {
      signals_seen = signals;
      const std::string dump = FormatSnapshot(recorder_->Snapshot(me));
      std::fprintf(stderr, "strata: SIGUSR1: %s", dump.c_str());
      Request(absl::StrCat("SIGUSR1 on ", me));
    }
    std::optional<RunningCollective> r = recorder_->LongestRunning();
    if (r.has_value() && r->waited >= options_.stall_threshold && r->seq != reported_seq) {
      reported_seq = r->seq;
      Request(absl::StrFormat("%s waited %.1f s on %s", r->description,
                              absl::ToDoubleSeconds(r->waited), me));
    }
  }
}

void HangWatchdog::AnswerLoop() {
  const std::string& me = options_.task_names.at(static_cast<size_t>(options_.rank));
  while (!Stopping()) {
    const int n = next_.load();
    absl::StatusOr<std::string> request =
        options_.store->Get(absl::StrCat(options_.key_prefix, "/request/", n),
                            options_.request_wait);
    if (!request.ok()) {
      // DeadlineExceeded: none yet. Anything else: the store is gone (the
      // cluster failed); keep quiet and retry slowly until stopped.
      if (request.status().code() != absl::StatusCode::kDeadlineExceeded) {
        SleepFor(absl::Seconds(1));
      }
      continue;
    }
    (void)options_.store->Insert(absl::StrCat(options_.key_prefix, "/", n, "/", options_.rank),
                                 Serialize(recorder_->Snapshot(me)));
    if (options_.rank == 0) Diagnose(n, *request);
    next_.store(n + 1);
  }
}

void HangWatchdog::Diagnose(int n, const std::string& request) {
  const size_t nl = request.find('\n');
  const std::string requested_by = request.substr(0, nl);
  const std::string reason = nl == std::string::npos ? "" : request.substr(nl + 1);
  const absl::Time deadline = absl::Now() + options_.answer_timeout;
  std::vector<TaskReport> reports;
  for (size_t r = 0; r < options_.task_names.size(); ++r) {
    TaskReport t;
    t.task = options_.task_names[r];
    absl::StatusOr<std::string> answer =
        options_.store->Get(absl::StrCat(options_.key_prefix, "/", n, "/", r),
                            std::max(deadline - absl::Now(), absl::Milliseconds(1)));
    FlightRecorderSnapshot s;
    if (!answer.ok()) {
      t.missing = answer.status().code() == absl::StatusCode::kDeadlineExceeded
                      ? absl::StrFormat("no answer within %.1f s",
                                        absl::ToDoubleSeconds(options_.answer_timeout))
                      : std::string(answer.status().message());
    } else if (!s.ParseFromString(*answer)) {
      t.missing = "its answer is not a flight recorder snapshot";
    } else {
      t.snapshot = std::move(s);
    }
    reports.push_back(std::move(t));
  }
  const std::string text = DiagnoseHang(reports, n + 1, requested_by, reason);
  if (options_.print) {
    options_.print(text);
  } else {
    std::fprintf(stderr, "%s", text.c_str());
  }
}

}  // namespace strata
