// ThreadSanitizer suppressions compiled into every binary that links the
// graph core, so `bazel test --config=tsan` needs no options file.
//
// Debian's abseil is prebuilt without TSan instrumentation: the atomic
// reference counts inside absl::Status and absl::Cord (in libabsl_status.so,
// libabsl_cord*.so) are invisible to TSan, so the release of a status payload
// shared between threads looks like an unsynchronized delete. Strata's own
// locks are pthread-based (graph/mutex.h) and stay fully checked.
extern "C" const char* __tsan_default_suppressions() {
  return "race:absl::debian3::Status::\n"
         "race:absl::debian3::status_internal::\n"
         "race:absl::debian3::Cord\n"
         "race:absl::debian3::cord_internal::\n";
}
