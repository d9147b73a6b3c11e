// InProcessTransport: the Transport for ranks that all live in one process
// (virtual CPU devices, the N-rank test harness). The ranks of one
// communicator share an InProcessMailbox; a message is matched there by
// (src, dst, tag) and copied once, straight from the sender's buffer into the
// receiver's, by whichever side arrives second. The mailbox is made per
// collective instance, so together with the executor's instance table the key
// is (group, instance, step, src, dst, tag).
//
//   auto mailbox = std::make_shared<InProcessMailbox>(/*size=*/4);
//   std::unique_ptr<Transport> t0 = mailbox->Connect(0);   // one per rank
//   ...
//   mailbox->Abort(absl::CancelledError("step cancelled"));  // fails every rank's pending ops
//
// Sends complete when their receive is matched (rendezvous), so a sender's
// buffer is read in place, never staged.
//
// Thread-safety: thread-safe. Ownership: transports share the mailbox
// (shared_ptr); buffers as for Transport.
#ifndef STRATA_RUNTIME_COLLECTIVE_TRANSPORT_IN_PROCESS_TRANSPORT_H_
#define STRATA_RUNTIME_COLLECTIVE_TRANSPORT_IN_PROCESS_TRANSPORT_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "base/mutex.h"
#include "runtime/collective/transport/transport.h"

namespace strata {

class InProcessMailbox : public std::enable_shared_from_this<InProcessMailbox> {
 public:
  explicit InProcessMailbox(int size) : size_(size) {}
  InProcessMailbox(const InProcessMailbox&) = delete;
  InProcessMailbox& operator=(const InProcessMailbox&) = delete;

  int size() const { return size_; }
  // Rank `rank`'s end (0 <= rank < size). The mailbox must be owned by a
  // shared_ptr.
  std::unique_ptr<Transport> Connect(int rank);
  // Fails every pending and later operation with `status` (first one wins).
  void Abort(const absl::Status& status);

  void Send(int src, int dst, uint64_t tag, const void* data, size_t bytes, Transport::Callback done);
  void Recv(int src, int dst, uint64_t tag, void* data, size_t bytes, Transport::Callback done);

 private:
  struct Key {
    int src, dst;
    uint64_t tag;
    bool operator==(const Key& o) const { return src == o.src && dst == o.dst && tag == o.tag; }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.src, k.dst, k.tag);
    }
  };
  struct Posted {
    void* data = nullptr;  // const for a send
    size_t bytes = 0;
    Transport::Callback done;
  };
  absl::Status CheckRanks(int src, int dst) const;
  // Copies a matched pair and runs both callbacks (no lock held).
  static void Complete(const Key& k, Posted send, Posted recv);

  const int size_;
  Mutex mu_;
  absl::Status aborted_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Key, Posted> sends_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Key, Posted> recvs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_TRANSPORT_IN_PROCESS_TRANSPORT_H_
