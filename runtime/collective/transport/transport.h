// Transport: how the ranks of one collective exchange bytes. It is the only
// thing collective algorithms (AllReduceRing, ...) talk to, in the style of
// Gloo's pairs: a tagged, point-to-point send or receive of a buffer to or
// from a peer rank, asynchronous, with an abort that fails every pending and
// later operation of every rank. One Transport object is one rank's end of
// one communicator (the `size` ranks of one collective instance).
//
//   PendingOps ops;
//   t.RecvAsync(left, /*tag=*/s, scratch, bytes, ops.Add());
//   t.SendAsync(right, /*tag=*/s, chunk, bytes, ops.Add());
//   STRATA_RETURN_IF_ERROR(ops.Wait());     // both done (or the first error)
//
// Matching: a send from rank a to rank b with tag t meets the receive posted
// by b from a with tag t; each (src, dst, tag) is used at most once per
// communicator. The byte counts must agree (Internal otherwise: an algorithm
// bug). Sends may complete only when matched, so an algorithm posts its
// receives before waiting on its sends.
//
// Implementations (this folder): InProcessTransport (every rank in one
// process, one memcpy per message), the shared-memory transport
// (shm_transport.h, processes of one host) and TcpTransport (tcp_transport.h,
// across hosts).
//
// Capabilities: what a transport offers beyond send/receive, an algorithm
// asks for through a virtual accessor that returns nullptr where the
// transport has none (never a cast to an implementation):
//   SharedWorkspace* ws = t.shared_workspace();   // shared_workspace.h
//
// Thread-safety: every method may be called concurrently. Ownership: buffers
// are not owned; they must stay valid until their operation's callback ran.
#ifndef STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TRANSPORT_H_
#define STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "base/mutex.h"

namespace strata {

class SharedWorkspace;  // shared_workspace.h

class Transport {
 public:
  // Runs exactly once, possibly on another rank's thread, possibly inside
  // the call that posted the operation. It must not block.
  using Callback = std::function<void(absl::Status)>;

  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // What carries the bytes: "in_process", "shm", "tcp". SelectAlgorithm may
  // pick an algorithm made for one kind (every rank of a communicator has
  // the same kind).
  virtual const char* kind() const = 0;

  // Sends `bytes` bytes at `data` to rank `dst`. `done` runs once the buffer
  // may be reused, or with the error that ended the operation.
  virtual void SendAsync(int dst, uint64_t tag, const void* data, size_t bytes, Callback done) = 0;
  // Receives exactly `bytes` bytes from rank `src` into `data`.
  virtual void RecvAsync(int src, uint64_t tag, void* data, size_t bytes, Callback done) = 0;
  // Fails every pending and later operation of every rank of this
  // communicator with `status` (the first abort's status wins).
  virtual void Abort(const absl::Status& status) = 0;

  // Optional: lets the thread that waits for this transport's operations
  // move their bytes itself. Runs `start` (which posts the operations to
  // wait for) on this thread, then blocks until `done()` is true and returns
  // true; or, if this transport has no use for the waiting thread (the
  // default), runs `start` and returns false at once: the caller then waits
  // for its callbacks as usual. `done` must turn true only in `start` or in
  // callbacks of this transport's operations; it is called on the waiting thread,
  // without transport locks, and must be cheap. TcpTransport reads, writes
  // and runs callbacks on the waiting thread, saving the thread wake-ups of
  // handing each message from its I/O thread to the waiter.
  virtual bool DriveUntil(const std::function<void()>& start, const std::function<bool()>& done) {
    (void)done;
    start();
    return false;
  }

  // Optional: memory every rank of this communicator maps, with a barrier
  // (the shared-memory transport has it; AllReduceShm runs in it). nullptr:
  // this transport has none. Lives as long as the transport.
  virtual SharedWorkspace* shared_workspace() { return nullptr; }
};

// Collectives of at most this many bytes wait in Transport::DriveUntil
// (over TCP the calling thread moves the bytes, saving two thread wake-ups
// per ring step); larger ones leave them to the transport's I/O thread,
// which measured as fast on a quiet machine and up to 30% faster at 1-16 MiB
// when other processes compete for the cores (the pipelined ring
// all-reduce's measurement; the ring all-gather uses the same bound).
inline constexpr int64_t kDriveMaxBytes = 1 << 20;

// Waits for a batch of transport operations: Add() gives each its callback,
// Wait() returns once all have run, with the first error (if any).
class PendingOps {
 public:
  PendingOps() = default;
  PendingOps(const PendingOps&) = delete;
  PendingOps& operator=(const PendingOps&) = delete;
  // Every callback handed out must have run before the destructor.
  ~PendingOps() = default;

  Transport::Callback Add();
  absl::Status Wait();
  // Runs `start` (which posts operations with callbacks from Add()) through
  // t.DriveUntil, so that a transport that moves bytes on the waiting thread
  // does so until every callback has run, then returns as Wait() does.
  absl::Status DriveAndWait(Transport& t, const std::function<void()>& start);
  // Posts with `start` and waits: through DriveAndWait when `bytes` (the
  // caller's measure of its messages: a block) is at most kDriveMaxBytes,
  // else leaving them to the transport's threads (Wait).
  absl::Status PostAndWait(Transport& t, int64_t bytes, const std::function<void()>& start);

 private:
  Mutex mu_;
  CondVar all_done_;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TRANSPORT_H_
