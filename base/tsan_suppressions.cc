// ThreadSanitizer suppressions compiled into every binary that links the
// graph core, so `bazel test --config=tsan` needs no options file.
//
// Debian's abseil is prebuilt without TSan instrumentation: the atomic
// reference counts inside absl::Status and absl::Cord (in libabsl_status.so,
// libabsl_cord*.so) are invisible to TSan, so the release of a status payload
// shared between threads looks like an unsynchronized delete. Strata's own
// locks are pthread-based (base/mutex.h) and stay fully checked.
//
// Debian's gRPC C core (libgrpc, libgpr) is uninstrumented too: TSan cannot
// see how its threads hand file descriptors and memory to each other and
// reports races inside it (epoll_create1 in one thread, epoll_wait in its
// poller, or a gRPC thread copying a request the caller's thread built).
// Calls made from inside those libraries (and from the libraries gRPC's
// threads work in: abseil's, upb, re2, c-ares), and races with a gRPC frame
// (namespaces grpc::, grpc_core::, grpc_event_engine::) on either side, are
// ignored; Strata's own code (strata::, including its gRPC handlers and
// client) stays checked. gRPC locks with absl::Mutex, whose
// deadlock-detection graph (GraphCycles) is uninstrumented the same way;
// Strata itself never uses absl::Mutex.
//
// OpenSSL (libssl, libcrypto: TLS, under gRPC's SSL credentials and the TCP
// transport's TlsStream) is uninstrumented too: its reference counts and
// shared contexts are atomics TSan cannot see. Calls from inside it are
// ignored; Strata's use of it (TlsStream serializes each session under a
// pthread mutex) stays checked.
extern "C" const char* __tsan_default_suppressions() {
  return "race:absl::debian3::Status::\n"
         "race:absl::debian3::status_internal::\n"
         "race:absl::debian3::Cord\n"
         "race:absl::debian3::cord_internal::\n"
         "called_from_lib:libgrpc.so.29\n"
         "called_from_lib:libgpr.so.29\n"
         "called_from_lib:libabsl_status.so\n"
         "called_from_lib:libabsl_strings.so\n"
         "called_from_lib:libabsl_str_format_internal.so\n"
         "called_from_lib:libabsl_time.so\n"
         "called_from_lib:libabsl_time_zone.so\n"
         "called_from_lib:libabsl_cord.so\n"
         "called_from_lib:libabsl_cord_internal.so\n"
         "called_from_lib:libabsl_synchronization.so\n"
         "called_from_lib:libabsl_graphcycles_internal.so\n"
         "called_from_lib:libabsl_raw_hash_set.so\n"
         "called_from_lib:libupb.so\n"
         "called_from_lib:libre2.so\n"
         "called_from_lib:libcares.so\n"
         "called_from_lib:libaddress_sorting.so\n"
         "called_from_lib:libssl.so.3\n"
         "called_from_lib:libcrypto.so.3\n"
         "race:absl::debian3::synchronization_internal::\n"
         "race:absl::debian3::Mutex::\n"
         "race:grpc::\n"
         "race:grpc_core::\n"
         "race:grpc_event_engine::\n";
}

// LeakSanitizer (--config=asan): c-ares, the DNS resolver under gRPC,
// keeps a 10-byte allocation per resolved name ("localhost") that it never
// frees; not Strata's to fix.
extern "C" const char* __lsan_default_suppressions() { return "leak:libcares.so\n"; }
