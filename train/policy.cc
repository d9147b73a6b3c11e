#include "train/policy.h"

#include "absl/strings/str_cat.h"
#include "base/mutex.h"

namespace strata {
namespace train {

namespace {

Mutex& PolicyMutex() {
  static Mutex* mu = new Mutex;
  return *mu;
}

Policy& GlobalPolicyLocked() {
  static Policy* p = new Policy;
  return *p;
}

}  // namespace

absl::StatusOr<Policy> PolicyFromName(absl::string_view name) {
  if (name == "float32") return Policy();
  if (name == "mixed_bfloat16") return Policy{"mixed_bfloat16", DT_BFLOAT16, DT_FLOAT};
  if (name == "mixed_float16") return Policy{"mixed_float16", DT_HALF, DT_FLOAT};
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dtype policy '", name, "'; Strata has 'float32', 'mixed_bfloat16' and 'mixed_float16'"));
}

void SetGlobalPolicy(const Policy& policy) {
  MutexLock l(&PolicyMutex());
  GlobalPolicyLocked() = policy;
}

Policy GlobalPolicy() {
  MutexLock l(&PolicyMutex());
  return GlobalPolicyLocked();
}

}  // namespace train
}  // namespace strata
