// TF_CONFIG and --cluster_spec parsing (strategy/cluster_resolver.h) on
// arbitrary text: InvalidArgument or a valid ClusterSpec, never a crash; a
// spec that parses answers every query about its own tasks.
#include <cstddef>
#include <cstdint>
#include <string>

#include "strategy/cluster_resolver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = strata::ClusterSpecFromTfConfig(text);
  if (spec.ok()) {
    (void)spec->ToClusterDef();
    (void)spec->ToServerDef();
    (void)spec->TaskPrefix();
    (void)spec->worker_id();
    (void)spec->address(spec->task_type(), spec->task_index());
  }
  // The flags' form: the cluster object, a type and an index, split at the
  // first two NUL bytes.
  const size_t a = text.find('\0');
  const size_t b = a == std::string::npos ? a : text.find('\0', a + 1);
  if (b != std::string::npos) {
    (void)strata::ClusterSpecFromFlags(text.substr(0, a), text.substr(a + 1, b - a - 1),
                                       text.substr(b + 1));
  }
  return 0;
}
