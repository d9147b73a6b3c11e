// Slurm's compact notations for a job step's nodes and tasks, expanded as
// Slurm (and TensorFlow's SlurmClusterResolver) read them:
//
//   ExpandHostlist("n[1-2],m5")          -> {"n1", "n2", "m5"}
//   ExpandHostlist("gpu[01-03,7]")       -> {"gpu01", "gpu02", "gpu03", "gpu7"}
//   ExpandHostlist("r[1-2]n[1-2]")       -> {"r1n1", "r1n2", "r2n1", "r2n2"}
//   ExpandTasksPerNode("2(x3),1")        -> {2, 2, 2, 1}
//
// A range keeps the width of its first bound ("01-03" is 01, 02, 03). Bad
// input (unbalanced brackets, a descending or non-numeric range, an empty
// name, a count of 0, more than kMaxHostlistEntries entries) is
// InvalidArgument naming the text and what is wrong; never a crash or
// unbounded memory.
//
// Thread-safety: reentrant.
#ifndef STRATA_STRATEGY_SLURM_HOSTLIST_H_
#define STRATA_STRATEGY_SLURM_HOSTLIST_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace strata {

// The most hosts or tasks an expansion may produce.
inline constexpr int kMaxHostlistEntries = 65536;

// SLURM_STEP_NODELIST / SLURM_JOB_NODELIST.
absl::StatusOr<std::vector<std::string>> ExpandHostlist(absl::string_view hostlist);

// SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE: "N" or "N(xR)" items,
// comma-separated; one count per node.
absl::StatusOr<std::vector<int>> ExpandTasksPerNode(absl::string_view tasks_per_node);

}  // namespace strata

#endif  // STRATA_STRATEGY_SLURM_HOSTLIST_H_
