// The coordination service's request handling (runtime/coordination/
// coordination_service.h) on arbitrary sequences of requests, as a task or
// an outsider could send them: every call returns a status, the service never
// crashes, and its key-value store stays within its bounds.
//
// Input: records of [kind byte][length u16 LE][serialized request of that
// kind]; each runs against one service (3 tasks) made per input, with every
// timeout cut to at most 2 ms.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/coordination.pb.h"
#include "runtime/coordination/coordination_service.h"

namespace {

absl::Duration Short(int64_t ms) { return absl::Milliseconds(std::clamp<int64_t>(ms, 0, 2)); }

void Run(strata::CoordinationServiceImpl& s, uint8_t kind, const std::string& bytes) {
  switch (kind % 8) {
    case 0: {
      strata::RegisterTaskRequest r;
      if (!r.ParseFromString(bytes)) return;
      (void)s.RegisterTask(r.task(), r.incarnation(), {r.devices().begin(), r.devices().end()},
                           r.cluster_fingerprint(), Short(r.timeout_ms()));
      return;
    }
    case 1: {
      strata::HeartbeatRequest r;
      if (r.ParseFromString(bytes)) (void)s.Heartbeat(r.task(), r.incarnation());
      return;
    }
    case 2: {
      strata::WaitForBarrierRequest r;
      if (!r.ParseFromString(bytes)) return;
      (void)s.WaitForBarrier(r.barrier_id(), r.task(), Short(r.timeout_ms()),
                             {r.tasks().begin(), r.tasks().end()});
      return;
    }
    case 3: {
      strata::InsertKeyValueRequest r;
      if (r.ParseFromString(bytes)) (void)s.InsertKeyValue(r.key(), r.value());
      return;
    }
    case 4: {
      strata::GetKeyValueRequest r;
      if (r.ParseFromString(bytes)) (void)s.GetKeyValue(r.key(), Short(r.timeout_ms()));
      return;
    }
    case 5: {
      strata::ReportErrorRequest r;
      if (!r.ParseFromString(bytes)) return;
      // The gRPC handler refuses codes outside absl's before this point.
      if (r.code() <= 0 || r.code() > 16) return;
      (void)s.ReportError(r.task(),
                          absl::Status(static_cast<absl::StatusCode>(r.code()), r.message()));
      return;
    }
    case 6: {
      strata::PollForErrorRequest r;
      absl::Status error;
      if (r.ParseFromString(bytes)) (void)s.PollForError(r.task(), Short(r.timeout_ms()), &error);
      return;
    }
    default: {
      strata::ShutdownTaskRequest r;
      if (r.ParseFromString(bytes)) (void)s.ShutdownTask(r.task(), Short(r.timeout_ms()));
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  strata::CoordinationServiceOptions o;
  o.tasks = {"/job:chief/replica:0/task:0", "/job:worker/replica:0/task:0",
             "/job:worker/replica:0/task:1"};
  o.cluster_fingerprint = "abc";
  o.heartbeat_timeout = absl::Milliseconds(50);
  o.register_timeout = absl::Milliseconds(2);
  o.max_value_bytes = 1024;
  o.max_keys = 64;
  o.max_store_bytes = 16 << 10;
  auto s = strata::CoordinationServiceImpl::Create(o);
  if (!s.ok()) __builtin_trap();
  size_t pos = 0;
  int calls = 0;
  while (pos + 3 <= size && calls++ < 64) {
    const uint8_t kind = data[pos];
    uint16_t len;
    std::memcpy(&len, data + pos + 1, 2);
    pos += 3;
    len = static_cast<uint16_t>(std::min<size_t>(len, size - pos));
    Run(**s, kind, std::string(reinterpret_cast<const char*>(data) + pos, len));
    pos += len;
  }
  return 0;
}
