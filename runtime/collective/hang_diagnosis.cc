#include "runtime/collective/hang_diagnosis.h"

#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/collective/flight_recorder.h"

namespace strata {
namespace {

using Key = std::tuple<int, int, uint64_t>;  // group, instance, execution

Key KeyOf(const CollectiveRecord& r) { return Key{r.group_key(), r.instance_key(), r.execution()}; }

const CollectiveRecord* Find(const FlightRecorderSnapshot& s, const Key& k) {
  for (const CollectiveRecord& r : s.records()) {
    if (KeyOf(r) == k) return &r;
  }
  return nullptr;
}

// Whether the task started execution `k` of its (group, instance) or a
// later one.
bool Started(const FlightRecorderSnapshot& s, const Key& k) {
  for (const CollectiveRecord& r : s.records()) {
    if (r.group_key() == std::get<0>(k) && r.instance_key() == std::get<1>(k) &&
        r.execution() >= std::get<2>(k)) {
      return true;
    }
  }
  return false;
}

const CollectiveRecord* LongestRunning(const FlightRecorderSnapshot& s) {
  const CollectiveRecord* out = nullptr;
  for (const CollectiveRecord& r : s.records()) {
    if (r.state() == CollectiveRecord::RUNNING &&
        (out == nullptr || r.started_ago_seconds() > out->started_ago_seconds())) {
      out = &r;
    }
  }
  return out;
}

const CollectiveRecord* LastFinished(const FlightRecorderSnapshot& s) {
  for (int i = s.records_size() - 1; i >= 0; --i) {
    if (s.records(i).state() != CollectiveRecord::RUNNING) return &s.records(i);
  }
  return nullptr;
}

std::string Activity(const FlightRecorderSnapshot& s) {
  if (s.activity().empty()) return "";
  return absl::StrFormat("; it is in \"%s\" for %.1f s", s.activity(), s.activity_age_seconds());
}

std::string LastCollective(const FlightRecorderSnapshot& s) {
  const CollectiveRecord* last = LastFinished(s);
  if (last == nullptr) return "; it has finished no collective yet";
  return absl::StrFormat("; its last collective: %s, %s %.1f s ago", DescribeRecord(*last),
                         last->state() == CollectiveRecord::DONE ? "done" : "failed",
                         last->started_ago_seconds() - last->duration_seconds());
}

}  // namespace

std::string DiagnoseHang(const std::vector<TaskReport>& tasks, int number,
                         absl::string_view requested_by, absl::string_view reason) {
  std::string out = absl::StrCat("strata: hang diagnosis #", number, ", requested by ",
                                 requested_by, " (", reason, "):\n");
  // The collective waited in longest, anywhere.
  const CollectiveRecord* ref = nullptr;
  for (const TaskReport& t : tasks) {
    if (!t.snapshot.has_value()) continue;
    const CollectiveRecord* r = LongestRunning(*t.snapshot);
    if (r != nullptr && (ref == nullptr || r->started_ago_seconds() > ref->started_ago_seconds())) {
      ref = r;
    }
  }
  std::vector<std::string> waiting, behind, other, mismatches;
  int num_waiting = 0;
  double longest_wait = 0;
  if (ref != nullptr) {
    const Key k = KeyOf(*ref);
    for (const TaskReport& t : tasks) {
      if (!t.snapshot.has_value()) continue;
      const CollectiveRecord* r = Find(*t.snapshot, k);
      if (r != nullptr && r->state() == CollectiveRecord::RUNNING) {
        ++num_waiting;
        longest_wait = std::max(longest_wait, r->started_ago_seconds());
      }
    }
    for (const TaskReport& t : tasks) {
      if (!t.snapshot.has_value()) continue;
      const FlightRecorderSnapshot& s = *t.snapshot;
      const CollectiveRecord* r = Find(s, k);
      if (r != nullptr && r->state() == CollectiveRecord::RUNNING) {
        waiting.push_back(absl::StrFormat("  waiting: %s at step %d in %s for %.1f s\n", t.task,
                                          s.step(), DescribeRecord(*r), r->started_ago_seconds()));
        continue;
      }
      if (Started(s, k)) {
        other.push_back(absl::StrFormat("  past it: %s at step %d%s%s\n", t.task, s.step(),
                                        Activity(s), LastCollective(s)));
        continue;
      }
      std::string line = absl::StrFormat(
          "  behind: %s at step %d has not started %s, which %d task%s wait%s in for %.1f s%s%s",
          t.task, s.step(), DescribeRecord(*ref), num_waiting, num_waiting == 1 ? "" : "s",
          num_waiting == 1 ? "s" : "", longest_wait, Activity(s), LastCollective(s));
      const CollectiveRecord* own = LongestRunning(s);
      if (own != nullptr) {
        absl::StrAppendFormat(&line, "; it waits in %s for %.1f s instead", DescribeRecord(*own),
                              own->started_ago_seconds());
        // Does any task that waits in `ref` know `own`? If none started it,
        // the tasks issue different collectives.
        const Key ko = KeyOf(*own);
        std::vector<std::string> ahead;
        for (const TaskReport& u : tasks) {
          if (!u.snapshot.has_value() || &u == &t) continue;
          const CollectiveRecord* ur = Find(*u.snapshot, k);
          if (ur != nullptr && ur->state() == CollectiveRecord::RUNNING &&
              !Started(*u.snapshot, ko)) {
            mismatches.push_back(absl::StrFormat(
                "  mismatch: %s and %s issue different collectives: %s waits in %s, %s in %s\n",
                t.task, u.task, t.task, DescribeRecord(*own), u.task, DescribeRecord(*ur)));
            break;
          }
        }
      }
      behind.push_back(line + "\n");
    }
  }
  for (const std::string& m : mismatches) out += m;
  for (const std::string& b : behind) out += b;
  for (const std::string& w : waiting) out += w;
  for (const std::string& o : other) out += o;
  for (const TaskReport& t : tasks) {
    if (t.snapshot.has_value()) {
      if (ref == nullptr) {
        absl::StrAppendFormat(&out, "  %s at step %d, in no collective%s%s\n", t.task,
                              t.snapshot->step(), Activity(*t.snapshot),
                              LastCollective(*t.snapshot));
      }
      continue;
    }
    absl::StrAppend(&out, "  no answer: ", t.task, " (", t.missing, ")\n");
  }
  if (ref != nullptr && behind.empty()) {
    const bool any_missing = std::any_of(
        tasks.begin(), tasks.end(), [](const TaskReport& t) { return !t.snapshot.has_value(); });
    absl::StrAppend(&out, any_missing
                              ? "  every task that answered waits in it: the ones that did not "
                                "answer hold it up\n"
                              : "  every task waits in it: its data is not moving (a stalled or "
                                "partitioned network between them)\n");
  }
  return out;
}

}  // namespace strata
