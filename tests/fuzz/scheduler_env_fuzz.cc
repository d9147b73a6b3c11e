// The schedulers' environments (strategy/scheduler_resolvers.h) on
// arbitrary input: Slurm hostlists and tasks-per-node, and whole
// environments of NAME=value lines given to every resolver, auto and
// forced. InvalidArgument or a cluster, never a crash or unbounded memory.
// The MPI resolver's port and address exchange are stood in for (no
// sockets, no PMIx).
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "strategy/scheduler_resolvers.h"
#include "strategy/slurm_hostlist.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)strata::ExpandHostlist(text);
  (void)strata::ExpandTasksPerNode(text);

  std::map<std::string, std::string> env;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    if (!kv.first.empty()) env[kv.first] = kv.second;
  }
  strata::ResolverOptions o;
  o.free_port = [](const std::string&) -> absl::StatusOr<int> { return 4000; };
  o.all_gather = [&env](const std::string& mine) -> absl::StatusOr<std::vector<std::string>> {
    // Whatever the environment claims, echoed as the exchange's result.
    std::vector<std::string> all = absl::StrSplit(env["FUZZ_GATHERED"], ',');
    if (all.size() > 64) all.resize(64);
    all.push_back(mine);
    return all;
  };
  const strata::Environment e = strata::MapEnvironment(env);
  for (const std::string& r : strata::ClusterResolverNames()) {
    o.resolver = r;
    auto resolved = strata::ResolveCluster(o, e);
    if (resolved.ok()) (void)resolved->Describe();
  }
  return 0;
}
