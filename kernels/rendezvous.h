// Rendezvous: where a Send on one device partition meets the matching Recv on
// another, by key. runtime/ implements it (in-process, later cross-process);
// the _Send/_Recv kernels see only this interface.
//
//   std::string key = Rendezvous::CreateKey(src_dev, incarnation, dst_dev, "x:0");
//   rendezvous->Send(key, tensor);
//   rendezvous->RecvAsync(key, [](const absl::Status& s, const Tensor& t) { ... });
//
// Thread-safety: every method may be called concurrently. A key is sent once
// and received once per step. After StartAbort(s), pending and later receives
// complete with `s`.
#ifndef STRATA_KERNELS_RENDEZVOUS_H_
#define STRATA_KERNELS_RENDEZVOUS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "graph/tensor.h"

namespace strata {

class Rendezvous {
 public:
  using DoneCallback = std::function<void(const absl::Status&, const Tensor&)>;
  virtual ~Rendezvous() = default;
  virtual absl::Status Send(const std::string& key, const Tensor& value) = 0;
  // `done` runs exactly once, possibly on the caller's thread.
  virtual void RecvAsync(const std::string& key, DoneCallback done) = 0;
  virtual void StartAbort(const absl::Status& status) = 0;

  // "src_device;incarnation(hex);dst_device;tensor_name".
  static std::string CreateKey(const std::string& src_device, uint64_t src_incarnation,
                               const std::string& dst_device, const std::string& tensor_name);
};

}  // namespace strata

#endif  // STRATA_KERNELS_RENDEZVOUS_H_
