// RemoteRendezvous: the Rendezvous (kernels/rendezvous.h) of a step whose
// partitions run in several processes (tasks), as TensorFlow's distributed
// runtime has. A key between two devices of this task goes to the step's
// local rendezvous; a key to or from another task's device crosses over a
// Transport (runtime/collective/transport/transport.h) whose ranks are the
// tasks: the sender posts a fixed-size header (dtype, shape, byte count, a
// hash of the key) and then the bytes; the receiver checks the header
// against what its _Recv expects (dtype, the shape it knows, a size bound)
// before it allocates anything, then receives the bytes straight into the
// new tensor's buffer (no staging copy; TcpTransport reads a large message
// into the posted buffer).
//
//   TaskLinks links = *TaskLinks::Create(transport, {"/job:worker/replica:0/task:0",
//                                                    "/job:worker/replica:0/task:1"});
//   RemoteRendezvous r(&local, &links, &expected, step_tag, schedule);
//   r.Send(key_to_task1, t);          // posted; returns at once
//   r.RecvAsync(key_from_task1, cb);  // cb on `schedule`, never on the transport's thread
//
// Matching: both tasks derive a message's transport tag from `step_tag` and
// the key without its incarnation ("src_device;dst_device;tensor"), so every
// task must run a multi-task step with the same step_tag (the session uses
// the step's signature and how many times this signature ran). Devices of
// another task are known here only by name: their incarnation is not part
// of the match (a restarted task has a new transport anyway).
//
// Failure: StartAbort fails this step's local receives and aborts the
// transport with the status, prefixed with this task's name, so every other
// task's pending and later exchanges fail with it (the transport is then
// unusable: as the data-parallel strategies do, a failed step ends the
// job). A header that does not match the receiver's expectations aborts
// the transport with InvalidArgument naming the tensor and both tasks.
//
// Limits: tensors in host memory of dtypes copied byte for byte (not
// strings) of rank <= 8; others are refused with Unimplemented at Send.
//
// Thread-safety: every method may be called concurrently. Ownership: the
// local rendezvous, the links and the expectations are not owned and must
// outlive the step's Send and Recv kernels; the transport must outlive every
// exchange posted (the sends of a step may still be in flight after it).
#ifndef STRATA_RUNTIME_REMOTE_RENDEZVOUS_H_
#define STRATA_RUNTIME_REMOTE_RENDEZVOUS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/mutex.h"
#include "graph/allocator.h"
#include "graph/graph.h"
#include "graph/tensor.h"
#include "kernels/rendezvous.h"
#include "runtime/collective/transport/transport.h"
#include "runtime/device.h"

namespace strata {

// The tasks of a cluster and the transport between them (one rank each).
class TaskLinks {
 public:
  // `tasks[r]` is rank r's task ("/job:worker/replica:0/task:1"); this
  // process is `transport->rank()`. InvalidArgument for a size mismatch, a
  // task named twice or a name that is not a task's.
  static absl::StatusOr<TaskLinks> Create(Transport* transport, std::vector<std::string> tasks);

  Transport* transport() const { return transport_; }
  const std::vector<std::string>& tasks() const { return tasks_; }
  const std::string& local_task() const { return tasks_[transport_->rank()]; }
  // The rank of a task, or -1.
  int RankOf(absl::string_view task) const;

 private:
  TaskLinks(Transport* t, std::vector<std::string> tasks);
  Transport* transport_;
  std::vector<std::string> tasks_;
  absl::flat_hash_map<std::string, int> rank_;
};

// The task a full device name belongs to: "/job:j/replica:r/task:t".
// InvalidArgument if `device` is not a full name.
absl::StatusOr<std::string> TaskOfDevice(absl::string_view device);

// What a task's _Recv of a tensor from another task accepts.
struct RemoteRecvSpec {
  DataType dtype = DT_INVALID;
  PartialTensorShape shape;        // the receiver's knowledge; unknown dims accept any size
  Allocator* allocator = nullptr;  // where the received tensor lives
};
// By RemoteRendezvous::WireName of the key.
using RemoteRecvSpecs = absl::flat_hash_map<std::string, RemoteRecvSpec>;

// Why a tensor announced by another task (its dtype, dims and byte count)
// is not acceptable for `spec`, or "" (then `shape` is set): checked before
// anything is allocated for it. A shape `spec` does not fully know is
// refused beyond `max_bytes`.
std::string CheckRemoteTensor(int32_t dtype, absl::Span<const int64_t> dims, uint64_t bytes,
                              const RemoteRecvSpec& spec, uint64_t max_bytes, TensorShape* shape);

// For a partition `g` on `device`: sets `crosses` if one of its _Send or
// _Recv nodes pairs with a device `is_local` says is another task's, and
// adds what each _Recv from another task accepts to `by_key` (by the full
// rendezvous key its kernel makes). Unimplemented for such an edge at a
// GPU partition.
absl::Status ScanRecvsFromOtherTasks(const Graph& g, Device* device,
                                     const std::function<bool(const std::string&)>& is_local,
                                     bool* crosses, RemoteRecvSpecs* by_key);

class RemoteRendezvous : public Rendezvous {
 public:
  // Runs a function on some thread (a pool's Schedule).
  using Scheduler = std::function<void(std::function<void()>)>;
  // A received tensor whose shape the receiver does not fully know is
  // refused beyond this many bytes.
  static constexpr uint64_t kDefaultMaxBytes = uint64_t{1} << 36;

  RemoteRendezvous(Rendezvous* local, const TaskLinks* links, const RemoteRecvSpecs* expected,
                   uint64_t step_tag, Scheduler schedule, uint64_t max_bytes = kDefaultMaxBytes);
  // Waits until every call to `schedule` made for a receive has returned:
  // the receiver may finish its step (and destroy the scheduler's pool)
  // while the transport's thread is still inside that call.
  ~RemoteRendezvous() override;

  absl::Status Send(const std::string& key, const Tensor& value) override;
  void RecvAsync(const std::string& key, DoneCallback done) override;
  void StartAbort(const absl::Status& status) override;
  // The receives from other tasks still waiting for their tensor, sorted
  // ("receiving <src;dst;tensor> from <task> on <task>"): what a step that
  // does not finish waits for.
  std::vector<std::string> WaitingReceives() const;

  // "src_device;dst_device;tensor": the key without the incarnation.
  // InvalidArgument for a key not made by CreateKey.
  static absl::StatusOr<std::string> WireName(absl::string_view key);
  // The task of the key's receiving device ("/job:j/replica:r/task:t").
  // InvalidArgument for a key not made by CreateKey.
  static absl::StatusOr<std::string> DestinationTask(absl::string_view key);

 private:
  struct Route {
    std::string wire_name;
    std::string src_task, dst_task;
    int peer = -1;  // the other task's rank; -1: both devices are this task's
  };
  absl::StatusOr<Route> RouteOf(const std::string& key) const;
  uint64_t TagOf(const std::string& wire_name) const;

  // Calls to `schedule_` not yet returned; shared with the receives, which
  // may still be releasing its mutex when the destructor's wait ends.
  struct InFlight {
    Mutex mu;
    int n ABSL_GUARDED_BY(mu) = 0;
    // Receives from other tasks whose tensor has not arrived ("receiving
    // <tensor> from <task> on <task>"), for messages.
    std::set<std::string> waiting ABSL_GUARDED_BY(mu);
  };

  Rendezvous* const local_;
  const TaskLinks* const links_;
  const RemoteRecvSpecs* const expected_;
  const uint64_t step_tag_;
  const Scheduler schedule_;
  const uint64_t max_bytes_;
  const std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
};

// A 64-bit FNV-1a hash of `bytes` continuing from `seed` (the same in every
// process, unlike absl::Hash): for tags both tasks derive.
uint64_t StableHash64(absl::string_view bytes, uint64_t seed = 14695981039346656037ull);

}  // namespace strata

#endif  // STRATA_RUNTIME_REMOTE_RENDEZVOUS_H_
