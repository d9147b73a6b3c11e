// Helpers of the TcpTransport tests (tcp_transport_test.cc and
// tcp_transport_security_test.cc): ranks connected as threads, messages sent
// and received one at a time or driven (DriveUntil), and the scenarios both
// files run over plain and TLS connections.
#ifndef STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TCP_TRANSPORT_TEST_UTIL_H_
#define STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TCP_TRANSPORT_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/collective/transport/tcp_transport.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {
namespace tcp_test {

// Loopback ranks with a 20 s connect timeout.
TcpTransportOptions Options(const std::string& prefix = "test/tcp");
// Connects `n` ranks as threads; fails the test on error.
std::vector<std::unique_ptr<Transport>> ConnectThreads(int n, KeyValueStore& kv,
                                                       const TcpTransportOptions& o = Options());
absl::Status Send(Transport& t, int dst, uint64_t tag, const void* data, size_t bytes);
absl::Status Recv(Transport& t, int src, uint64_t tag, void* data, size_t bytes);
// `bytes` bytes of a pattern that differs by seed and position.
std::vector<char> Pattern(size_t bytes, int seed);
// Posts operations through `post(add)` (add() gives each its callback) and
// waits for them in DriveUntil; returns their first error.
using AddOp = std::function<Transport::Callback()>;
absl::Status Drive(Transport& t, const std::function<void(const AddOp&)>& post);
// A plain TCP connection to "host:port"; -1 if it cannot be made.
int ConnectRaw(const std::string& address);

// Eager and rendezvous sizes, 0 to 16 MiB.
inline constexpr size_t kSizes[] = {0, 1, 4 << 10, 64 << 10, (64 << 10) + 1, 1 << 20, 16 << 20};

// Scenarios over two or three ranks as threads, connected with `options`.
void EverySizeInEitherOrder(const TcpTransportOptions& options);
void ConcurrentTagsInAnyOrder(const TcpTransportOptions& options);
// Runs the registered ring all-reduce of `count` floats on `t`'s rank;
// checks the result against the directly computed sum.
absl::Status RingAllReduce(Transport& t, int64_t count);
void RingAllReduceOverThreads(const TcpTransportOptions& options);
void DrivenEverySizeBothWays(const TcpTransportOptions& options);

}  // namespace tcp_test
}  // namespace strata

#endif  // STRATA_RUNTIME_COLLECTIVE_TRANSPORT_TCP_TRANSPORT_TEST_UTIL_H_
