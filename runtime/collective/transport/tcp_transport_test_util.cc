#include "runtime/collective/transport/tcp_transport_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "gtest/gtest.h"
#include "kernels/collective.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/transport/tcp_socket.h"

namespace strata {
namespace tcp_test {

TcpTransportOptions Options(const std::string& prefix) {
  TcpTransportOptions o;
  o.host = "127.0.0.1";
  o.key_prefix = prefix;
  o.connect_timeout = absl::Seconds(20);
  return o;
}

// Connects `n` ranks as threads; fails the test on error.
std::vector<std::unique_ptr<Transport>> ConnectThreads(int n, KeyValueStore& kv,
                                                       const TcpTransportOptions& o) {
  std::vector<std::unique_ptr<Transport>> t(n);
  std::vector<absl::Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto c = ConnectTcpTransport(r, n, kv, o);
      if (c.ok()) {
        t[r] = std::move(*c);
      } else {
        status[r] = c.status();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
  return t;
}

absl::Status Send(Transport& t, int dst, uint64_t tag, const void* data, size_t bytes) {
  PendingOps ops;
  t.SendAsync(dst, tag, data, bytes, ops.Add());
  return ops.Wait();
}

absl::Status Recv(Transport& t, int src, uint64_t tag, void* data, size_t bytes) {
  PendingOps ops;
  t.RecvAsync(src, tag, data, bytes, ops.Add());
  return ops.Wait();
}

std::vector<char> Pattern(size_t bytes, int seed) {
  std::vector<char> v(bytes);
  for (size_t i = 0; i < bytes; ++i)
    v[i] = static_cast<char>((i * 131 + seed * 17 + (i >> 12)) & 0xff);
  return v;
}

// Posts operations through `post(add)` (add() gives each its callback) and
// waits for them in DriveUntil; returns their first error.
absl::Status Drive(Transport& t, const std::function<void(const AddOp&)>& post) {
  Mutex mu;
  int pending = 0;
  absl::Status first;
  const AddOp add = [&]() -> Transport::Callback {
    {
      MutexLock l(&mu);
      ++pending;
    }
    return [&](absl::Status s) {
      MutexLock l(&mu);
      if (first.ok() && !s.ok()) first = s;
      --pending;
    };
  };
  const bool drove = t.DriveUntil([&] { post(add); },
                                  [&] {
                                    MutexLock l(&mu);
                                    return pending == 0;
                                  });
  EXPECT_TRUE(drove) << "TcpTransport drives";
  MutexLock l(&mu);
  return first;
}

void EverySizeInEitherOrder(const TcpTransportOptions& options) {
  InMemoryKeyValueStore kv;
  auto t = ConnectThreads(2, kv, options);
  ASSERT_TRUE(t[0] && t[1]);
  uint64_t tag = 0;
  for (size_t bytes : kSizes) {
    for (bool recv_first : {true, false}) {
      SCOPED_TRACE(absl::StrCat(bytes, " bytes, recv first: ", recv_first));
      const std::vector<char> a = Pattern(bytes, 1), b = Pattern(bytes, 2);
      std::vector<char> got_a(bytes, 0), got_b(bytes, 0);
      PendingOps ops;
      ++tag;
      if (recv_first) {
        t[1]->RecvAsync(0, tag, got_a.data(), bytes, ops.Add());
        t[0]->RecvAsync(1, tag, got_b.data(), bytes, ops.Add());
        // Let the receivers' requests reach the senders first.
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      t[0]->SendAsync(1, tag, a.data(), bytes, ops.Add());
      t[1]->SendAsync(0, tag, b.data(), bytes, ops.Add());
      if (!recv_first) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        t[1]->RecvAsync(0, tag, got_a.data(), bytes, ops.Add());
        t[0]->RecvAsync(1, tag, got_b.data(), bytes, ops.Add());
      }
      ASSERT_TRUE(ops.Wait().ok());
      EXPECT_TRUE(got_a == a);
      EXPECT_TRUE(got_b == b);
    }
  }
}

// Many tags in flight on three ranks, each pair in both directions, sends
// and receives posted in different shuffled orders from several threads.
void ConcurrentTagsInAnyOrder(const TcpTransportOptions& options) {
  InMemoryKeyValueStore kv;
  constexpr int kRanks = 3, kTags = 24;
  auto t = ConnectThreads(kRanks, kv, options);
  for (auto& x : t) ASSERT_TRUE(x);
  auto bytes_of = [](int tag) -> size_t {
    return tag % 3 == 0 ? (200 << 10) + tag : 100 + tag * 37;
  };
  std::vector<std::vector<char>> sent, received;
  struct Op {
    int self, peer, tag;
    bool send;
    size_t slot;
  };
  std::vector<Op> ops;
  for (int s = 0; s < kRanks; ++s) {
    for (int d = 0; d < kRanks; ++d) {
      if (s == d) continue;
      for (int tag = 0; tag < kTags; ++tag) {
        sent.push_back(Pattern(bytes_of(tag), s * 100 + d * 10 + tag));
        received.emplace_back(bytes_of(tag), 0);
        ops.push_back({s, d, tag, true, sent.size() - 1});
        ops.push_back({d, s, tag, false, sent.size() - 1});
      }
    }
  }
  std::shuffle(ops.begin(), ops.end(), std::mt19937(7));
  PendingOps pending;
  std::vector<Transport::Callback> callbacks;
  for (size_t i = 0; i < ops.size(); ++i) callbacks.push_back(pending.Add());
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (size_t i = w; i < ops.size(); i += 4) {
        const Op& op = ops[i];
        if (op.send) {
          t[op.self]->SendAsync(op.peer, op.tag, sent[op.slot].data(), sent[op.slot].size(),
                                std::move(callbacks[i]));
        } else {
          t[op.self]->RecvAsync(op.peer, op.tag, received[op.slot].data(), received[op.slot].size(),
                                std::move(callbacks[i]));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(pending.Wait().ok());
  for (size_t i = 0; i < sent.size(); ++i) EXPECT_TRUE(sent[i] == received[i]) << "message " << i;
}

// Runs the registered ring all-reduce of `count` floats on rank `r`; checks
// the result against the directly computed sum.
absl::Status RingAllReduce(Transport& t, int64_t count) {
  const int n = t.size(), r = t.rank();
  AlgorithmParams p;
  p.type = CollectiveType::kAllReduce;
  p.rank = r;
  p.size = n;
  p.dtype = DT_FLOAT;
  p.num_elements = count;
  auto alg = CreateCollectiveAlgorithm(CollectiveType::kAllReduce, "ring", p);
  if (!alg.ok()) return alg.status();
  std::vector<float> in(count), out(count, -1.0f);
  for (int64_t i = 0; i < count; ++i) in[i] = static_cast<float>((r * 7 + i * 13) % 41 - 20);
  absl::Status s = (*alg)->Run(t, in.data(), out.data());
  if (!s.ok()) {
    t.Abort(s);
    return s;
  }
  for (int64_t i = 0; i < count; ++i) {
    float want = 0;
    for (int q = 0; q < n; ++q) want += static_cast<float>((q * 7 + i * 13) % 41 - 20);
    if (out[i] != want) {
      return absl::InternalError(
          absl::StrCat("rank ", r, " element ", i, ": ", out[i], " != ", want));
    }
  }
  return absl::OkStatus();
}

void RingAllReduceOverThreads(const TcpTransportOptions& options) {
  for (int n : {2, 3, 4}) {
    InMemoryKeyValueStore kv;
    auto t = ConnectThreads(n, kv, options);
    for (auto& x : t) ASSERT_TRUE(x);
    for (int64_t count : {int64_t{1}, int64_t{1000}, int64_t{(1 << 20) + 3}}) {
      SCOPED_TRACE(absl::StrCat(n, " ranks, ", count, " floats"));
      std::vector<absl::Status> status(n);
      std::vector<std::thread> threads;
      for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r] { status[r] = RingAllReduce(*t[r], count); });
      }
      for (auto& th : threads) th.join();
      for (int r = 0; r < n; ++r) EXPECT_TRUE(status[r].ok()) << status[r];
    }
  }
}

int ConnectRaw(const std::string& address) {
  std::string host;
  int port;
  if (!SplitHostPort(address, &host, &port).ok()) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void DrivenEverySizeBothWays(const TcpTransportOptions& options) {
  InMemoryKeyValueStore kv;
  auto t = ConnectThreads(2, kv, options);
  ASSERT_TRUE(t[0] && t[1]);
  for (size_t bytes : kSizes) {
    SCOPED_TRACE(absl::StrCat(bytes, " bytes"));
    std::vector<std::vector<char>> sent = {Pattern(bytes, 1), Pattern(bytes, 2)};
    std::vector<std::vector<char>> got(2, std::vector<char>(bytes));
    std::vector<absl::Status> status(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.emplace_back([&, r] {
        status[r] = Drive(*t[r], [&](const AddOp& add) {
          t[r]->RecvAsync(1 - r, 7, got[r].data(), bytes, add());
          t[r]->SendAsync(1 - r, 7, sent[r].data(), bytes, add());
        });
      });
    }
    for (auto& th : ranks) th.join();
    for (int r = 0; r < 2; ++r) {
      EXPECT_TRUE(status[r].ok()) << status[r];
      EXPECT_TRUE(got[r] == sent[1 - r]) << "rank " << r;
    }
  }
}

}  // namespace tcp_test
}  // namespace strata
