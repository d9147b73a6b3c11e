// TcpTransport on 127.0.0.1: ranks as threads of this process and as forked
// processes; matching in any order, eager and rendezvous sizes, concurrent
// tags, the ring all-reduce, waits that drive the sockets themselves
// (DriveUntil), and every failure a peer can cause.
#include "runtime/collective/transport/tcp_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "base/mutex.h"
#include "gmock/gmock.h"
#include "graph/types.h"
#include "gtest/gtest.h"
#include "kernels/collective.h"
#include "runtime/collective/algorithm.h"
#include "runtime/collective/file_key_value_store.h"
#include "runtime/collective/transport/tcp_socket.h"
#include "runtime/coordination/key_value_store.h"
#include "runtime/security/test_certs.h"
#include "runtime/security/tls.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

TcpTransportOptions Options(const std::string& prefix = "test/tcp") {
  TcpTransportOptions o;
  o.host = "127.0.0.1";
  o.key_prefix = prefix;
  o.connect_timeout = absl::Seconds(20);
  return o;
}

// Connects `n` ranks as threads; fails the test on error.
std::vector<std::unique_ptr<Transport>> ConnectThreads(int n, KeyValueStore& kv,
                                                       const TcpTransportOptions& o = Options()) {
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
using AddOp = std::function<Transport::Callback()>;
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

constexpr size_t kSizes[] = {0, 1, 4 << 10, 64 << 10, (64 << 10) + 1, 1 << 20, 16 << 20};

TEST(TcpTransportTest, KindRankSize) {
  InMemoryKeyValueStore kv;
  auto t = ConnectThreads(2, kv);
  ASSERT_TRUE(t[0] && t[1]);
  EXPECT_STREQ(t[0]->kind(), "tcp");
  EXPECT_EQ(t[0]->shared_workspace(), nullptr);  // no shared memory across hosts
  EXPECT_EQ(t[1]->rank(), 1);
  EXPECT_EQ(t[1]->size(), 2);
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

TEST(TcpTransportTest, EverySizeInEitherOrder) { EverySizeInEitherOrder(Options()); }

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

TEST(TcpTransportTest, ConcurrentTagsInAnyOrder) { ConcurrentTagsInAnyOrder(Options()); }

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

TEST(TcpTransportTest, RingAllReduceOverThreads) { RingAllReduceOverThreads(Options()); }

// The ring all-gather, its blocks moved by the waiting thread (up to 1 MiB,
// DriveUntil) and by the I/O thread (larger), the caller driving or not.
TEST(TcpTransportTest, RingAllGatherDrivenAndNot) {
  for (bool caller_drives : {true, false}) {
    for (int n : {2, 3}) {
      InMemoryKeyValueStore kv;
      TcpTransportOptions o = Options();
      o.caller_drives = caller_drives;
      auto t = ConnectThreads(n, kv, o);
      for (auto& x : t) ASSERT_TRUE(x);
      for (int64_t block : {int64_t{1}, int64_t{5000}, int64_t{300000}}) {
        SCOPED_TRACE(
            absl::StrCat(n, " ranks, blocks of ", block, ", caller drives ", caller_drives));
        std::vector<absl::Status> status(n);
        std::vector<std::thread> threads;
        for (int r = 0; r < n; ++r) {
          threads.emplace_back([&, r] {
            AlgorithmParams p;
            p.type = CollectiveType::kAllGather;
            p.rank = r;
            p.size = n;
            p.dtype = DT_INT32;
            p.num_elements = block;
            auto alg = CreateCollectiveAlgorithm(CollectiveType::kAllGather, "ring", p);
            if (!alg.ok()) {
              status[r] = alg.status();
              return;
            }
            std::vector<int32_t> in(block), out(block * n, -1);
            for (int64_t i = 0; i < block; ++i) in[i] = static_cast<int32_t>(r * 1000000 + i);
            for (int run = 0; run < 2 && status[r].ok(); ++run) {
              status[r] = (*alg)->Run(*t[r], in.data(), out.data());
              for (int64_t i = 0; i < block * n && status[r].ok(); ++i) {
                if (out[i] != (i / block) * 1000000 + i % block) {
                  status[r] =
                      absl::DataLossError(absl::StrCat("rank ", r, " element ", i, ": ", out[i]));
                }
              }
            }
          });
        }
        for (auto& th : threads) th.join();
        for (int r = 0; r < n; ++r)
          EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r];
      }
    }
  }
}

TEST(TcpTransportTest, SizeMismatchIsRejectedNamingThePeer) {
  for (size_t bytes : {size_t{100}, size_t{1} << 20}) {
    for (bool recv_first : {true, false}) {
      SCOPED_TRACE(absl::StrCat(bytes, " bytes, recv first: ", recv_first));
      InMemoryKeyValueStore kv;
      auto t = ConnectThreads(2, kv);
      ASSERT_TRUE(t[0] && t[1]);
      std::vector<char> out(bytes + 8, 1), in(bytes, 7);
      PendingOps recv_op, send_op;
      if (recv_first) t[1]->RecvAsync(0, 5, in.data(), bytes, recv_op.Add());
      t[0]->SendAsync(1, 5, out.data(), bytes + 8, send_op.Add());
      if (!recv_first) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        t[1]->RecvAsync(0, 5, in.data(), bytes, recv_op.Add());
      }
      const absl::Status r = recv_op.Wait();
      EXPECT_TRUE(absl::IsInternal(r)) << r;
      EXPECT_THAT(std::string(r.message()), HasSubstr(absl::StrCat("rank 0 sends ", bytes + 8)));
      EXPECT_THAT(std::string(r.message()), HasSubstr(absl::StrCat("rank 1 expects ", bytes)));
      EXPECT_EQ(in, std::vector<char>(bytes, 7)) << "no byte of the wrong-sized message is copied";
      // A large send still waiting is failed by the abort that follows; an
      // eager one was handed off already.
      send_op.Wait().IgnoreError();
      // The abort reaches the sender too (a receive there would otherwise
      // wait forever), and later operations fail on both ranks.
      const absl::Status r0 = Recv(*t[0], 1, 6, out.data(), 4);
      EXPECT_TRUE(absl::IsInternal(r0)) << r0;
      EXPECT_EQ(r0.message(), r.message());
      EXPECT_FALSE(Recv(*t[1], 0, 7, in.data(), 4).ok());
    }
  }
}

TEST(TcpTransportTest, AbortPropagatesWithItsMessage) {
  InMemoryKeyValueStore kv;
  auto t = ConnectThreads(3, kv);
  for (auto& x : t) ASSERT_TRUE(x);
  std::vector<char> buf(1 << 20);
  PendingOps r1, r2, s0;
  t[1]->RecvAsync(0, 1, buf.data(), 100, r1.Add());
  t[2]->RecvAsync(1, 1, buf.data(), buf.size(), r2.Add());
  t[0]->SendAsync(2, 9, buf.data(), buf.size(), s0.Add());  // waits for rank 2's receive
  t[0]->Abort(absl::CancelledError("step 7 cancelled by the user"));
  for (PendingOps* ops : {&r1, &r2, &s0}) {
    const absl::Status s = ops->Wait();
    EXPECT_TRUE(absl::IsCancelled(s)) << s;
    EXPECT_EQ(s.message(), "step 7 cancelled by the user");
  }
  const absl::Status later = Send(*t[2], 1, 3, buf.data(), 10);
  EXPECT_EQ(later.message(), "step 7 cancelled by the user");
}

TEST(TcpTransportTest, ConnectTimeoutNamesTheMissingRank) {
  TcpTransportOptions o = Options();
  o.connect_timeout = absl::Milliseconds(300);
  {
    InMemoryKeyValueStore kv;  // rank 1 of 2 never starts
    auto t = ConnectTcpTransport(0, 2, kv, o);
    ASSERT_FALSE(t.ok());
    EXPECT_TRUE(absl::IsDeadlineExceeded(t.status())) << t.status();
    EXPECT_THAT(std::string(t.status().message()), HasSubstr("rank 1 never published"));
  }
  {
    InMemoryKeyValueStore kv;  // rank 0 of 2 never starts
    auto t = ConnectTcpTransport(1, 2, kv, o);
    ASSERT_FALSE(t.ok());
    EXPECT_TRUE(absl::IsDeadlineExceeded(t.status())) << t.status();
    EXPECT_THAT(std::string(t.status().message()),
                HasSubstr("rank(s) 0 never connected to rank 1"));
  }
}

TEST(TcpTransportTest, BadOptions) {
  InMemoryKeyValueStore kv;
  TcpTransportOptions o = Options();
  o.host = "";
  EXPECT_TRUE(absl::IsInvalidArgument(ConnectTcpTransport(0, 2, kv, o).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ConnectTcpTransport(2, 2, kv, Options()).status()));
  o.host = "no-such-host.invalid";
  EXPECT_FALSE(ConnectTcpTransport(0, 2, kv, o).ok());
}

// The mesh's sockets under each congestion-control choice: "auto" trades a
// pacing default (bbr) for cubic or reno and keeps any other, "system"
// keeps the default, a name is set, and a name the host refuses fails the
// connect naming it.
TEST(TcpTransportTest, CongestionControlOfTheMesh) {
  const int probe = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(probe, 0);
  const std::string host_default = TcpCongestionControl(probe);
  close(probe);
  ASSERT_FALSE(host_default.empty());
  auto mesh = [](const std::string& cc, const std::string& prefix) {
    InMemoryKeyValueStore kv;
    std::vector<absl::StatusOr<std::vector<UniqueFd>>> fds(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        fds[r] = EstablishTcpMesh(r, 2, kv, "127.0.0.1", prefix, absl::Seconds(5),
                                  TcpSocketOptions{0, cc});
      });
    }
    for (auto& t : threads) t.join();
    return fds;
  };
  auto names = [](const std::vector<absl::StatusOr<std::vector<UniqueFd>>>& fds) {
    std::vector<std::string> v;
    for (int r = 0; r < 2; ++r) {
      if (!fds[r].ok()) return std::vector<std::string>{fds[r].status().ToString()};
      v.push_back(TcpCongestionControl((*fds[r])[1 - r].get()));
    }
    return v;
  };
  const bool pacing = host_default.rfind("bbr", 0) == 0;
  for (const std::string& got : names(mesh("auto", "cc/auto"))) {
    if (pacing) {
      EXPECT_TRUE(got == "cubic" || got == "reno")
          << got << " (host default " << host_default << ")";
    } else {
      EXPECT_EQ(got, host_default);
    }
  }
  for (const std::string& got : names(mesh("system", "cc/system"))) EXPECT_EQ(got, host_default);
  // reno is always allowed (net.ipv4.tcp_allowed_congestion_control).
  for (const std::string& got : names(mesh("reno", "cc/reno"))) EXPECT_EQ(got, "reno");
  auto bad = mesh("no-such-cc", "cc/bad");
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(bad[r].ok());
    EXPECT_TRUE(absl::IsInvalidArgument(bad[r].status())) << bad[r].status();
    EXPECT_THAT(std::string(bad[r].status().message()), HasSubstr("'no-such-cc'"));
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

// Stray connections to a listening rank (garbage, a wrong communicator, one
// that says nothing) are dropped; set-up still completes.
TEST(TcpTransportTest, GarbageOnTheListeningPortIsIgnored) {
  InMemoryKeyValueStore kv;
  absl::StatusOr<std::unique_ptr<Transport>> t1;
  std::thread rank1([&] { t1 = ConnectTcpTransport(1, 2, kv, Options()); });
  auto address = kv.Get("test/tcp/addr/1", absl::Seconds(10));
  ASSERT_TRUE(address.ok());
  std::vector<int> strays;
  for (int i = 0; i < 3; ++i) strays.push_back(ConnectRaw(*address));
  for (int fd : strays) ASSERT_GE(fd, 0);
  const std::string junk(1000, '\x5a');
  ASSERT_EQ(send(strays[0], junk.data(), junk.size(), MSG_NOSIGNAL), 1000);
  struct {
    uint32_t magic = 0x4c485453, version = 1;
    uint64_t comm = 12345;
    int32_t rank = 0, size = 2;
  } foreign;
  ASSERT_EQ(send(strays[1], &foreign, sizeof(foreign), MSG_NOSIGNAL), 24);
  auto t0 = ConnectTcpTransport(0, 2, kv, Options());
  rank1.join();
  ASSERT_TRUE(t0.ok()) << t0.status();
  ASSERT_TRUE(t1.ok()) << t1.status();
  char x = 'q', y = 0;
  PendingOps ops;
  (*t1)->RecvAsync(0, 1, &y, 1, ops.Add());
  (*t0)->SendAsync(1, 1, &x, 1, ops.Add());
  EXPECT_TRUE(ops.Wait().ok());
  EXPECT_EQ(y, 'q');
  for (int fd : strays) close(fd);
}

// Issue 23: with a job token only peers that prove it get in. An outsider
// that knows the hello but not the token (or speaks the token-less hello) is
// dropped and set-up completes with the real peer; a rank started with
// another token is refused naming the address, and its peer names it as
// never connected.
TEST(TcpTransportTest, WithAJobTokenOnlyPeersThatProveItConnect) {
  const JobToken token = *JobToken::FromSecret("tcp-test-job-token-0123456789");
  const JobToken other = *JobToken::FromSecret("another-jobs-token-0123456789");
  auto with = [](const JobToken& t, absl::Duration timeout) {
    TcpTransportOptions o = Options();
    o.job_token = t;
    o.connect_timeout = timeout;
    return o;
  };
  struct {
    uint32_t magic = 0x4c485453, version = 2;
    uint64_t comm = TcpCommunicatorId("test/tcp#2");
    int32_t rank = 0, size = 2;
  } hello;
  {
    InMemoryKeyValueStore kv;
    absl::StatusOr<std::unique_ptr<Transport>> t1;
    std::thread rank1([&] { t1 = ConnectTcpTransport(1, 2, kv, with(token, absl::Seconds(20))); });
    auto address = kv.Get("test/tcp/addr/1", absl::Seconds(10));
    ASSERT_TRUE(address.ok());
    timeval tv{20, 0};
    const int outsider = ConnectRaw(*address);
    ASSERT_GE(outsider, 0);
    setsockopt(outsider, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const std::string challenge(16, '\x42');
    ASSERT_EQ(send(outsider, &hello, sizeof(hello), MSG_NOSIGNAL), 24);
    ASSERT_EQ(send(outsider, challenge.data(), 16, MSG_NOSIGNAL), 16);
    char answer[24 + 16 + 32];
    ASSERT_EQ(recv(outsider, answer, sizeof(answer), MSG_WAITALL), 72);
    const std::string forged(32, '\0');
    ASSERT_EQ(send(outsider, forged.data(), 32, MSG_NOSIGNAL), 32);
    char byte;
    EXPECT_EQ(recv(outsider, &byte, 1, 0), 0) << "the forged answer was not refused";
    const int tokenless = ConnectRaw(*address);
    setsockopt(tokenless, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    hello.version = 1;
    ASSERT_EQ(send(tokenless, &hello, sizeof(hello), MSG_NOSIGNAL), 24);
    EXPECT_EQ(recv(tokenless, &byte, 1, 0), 0) << "a hello without the token was answered";
    auto t0 = ConnectTcpTransport(0, 2, kv, with(token, absl::Seconds(20)));
    rank1.join();
    ASSERT_TRUE(t0.ok()) << t0.status();
    ASSERT_TRUE(t1.ok()) << t1.status();
    char x = 'k', y = 0;
    PendingOps ops;
    (*t1)->RecvAsync(0, 1, &y, 1, ops.Add());
    (*t0)->SendAsync(1, 1, &x, 1, ops.Add());
    EXPECT_TRUE(ops.Wait().ok());
    EXPECT_EQ(y, 'k');
    close(outsider);
    close(tokenless);
  }
  {
    InMemoryKeyValueStore kv;
    absl::StatusOr<std::unique_ptr<Transport>> t1;
    std::thread rank1([&] { t1 = ConnectTcpTransport(1, 2, kv, with(other, absl::Seconds(3))); });
    auto t0 = ConnectTcpTransport(0, 2, kv, with(token, absl::Seconds(3)));
    rank1.join();
    auto address = kv.Get("test/tcp/addr/1", absl::Seconds(1));
    ASSERT_TRUE(address.ok());
    EXPECT_TRUE(absl::IsUnauthenticated(t0.status())) << t0.status();
    EXPECT_THAT(std::string(t0.status().message()), HasSubstr("did not prove this job's token"));
    EXPECT_THAT(std::string(t0.status().message()), HasSubstr(*address));
    EXPECT_TRUE(absl::IsDeadlineExceeded(t1.status())) << t1.status();
    EXPECT_THAT(std::string(t1.status().message()), HasSubstr("rank(s) 0 never connected"));
  }
}

// ---- Mutual TLS ----

// Certificates of one CA for 127.0.0.1, and one of another CA (made once).
struct TestTls {
  TlsConfig job, job2, foreign;
};
const TestTls& Certificates() {
  static const TestTls* tls = [] {
    auto* t = new TestTls;
    auto dir = io::MakeTempDir("tcp_tls");
    auto ca = MakeTestCa(*dir, "job");
    auto other = MakeTestCa(*dir, "other");
    auto load = [](const absl::StatusOr<TlsFiles>& f) {
      EXPECT_TRUE(f.ok()) << f.status();
      auto c = LoadTlsConfig(*f);
      EXPECT_TRUE(c.ok()) << c.status();
      return c.value_or(TlsConfig{});
    };
    EXPECT_TRUE(ca.ok() && other.ok());
    t->job = load(MakeTestCert(*ca, "rank", "IP:127.0.0.1"));
    t->job2 = load(MakeTestCert(*ca, "rank2", "IP:127.0.0.1"));
    t->foreign = load(MakeTestCert(*other, "foreign", "IP:127.0.0.1"));
    return t;
  }();
  return *tls;
}

void DrivenEverySizeBothWays(const TcpTransportOptions& options);  // below

TcpTransportOptions TlsOptions(const TlsConfig& tls = Certificates().job) {
  TcpTransportOptions o = Options();
  o.tls = tls;
  return o;
}

// Every byte through TLS: each message size either way round (small
// frames gathered into records, large ones split into many, writes that
// meet a full socket retried), concurrent tags, the ring, driven waits.
TEST(TcpTransportTlsTest, EverySizeInEitherOrder) { EverySizeInEitherOrder(TlsOptions()); }
TEST(TcpTransportTlsTest, ConcurrentTagsInAnyOrder) { ConcurrentTagsInAnyOrder(TlsOptions()); }
TEST(TcpTransportTlsTest, RingAllReduceOverThreads) { RingAllReduceOverThreads(TlsOptions()); }
TEST(TcpTransportTlsTest, DrivenEverySizeBothWays) { DrivenEverySizeBothWays(TlsOptions()); }

// Ranks with different certificates of the job's CA talk; with the token
// as well.
TEST(TcpTransportTlsTest, WithTheTokenToo) {
  InMemoryKeyValueStore kv;
  TcpTransportOptions a = TlsOptions(Certificates().job), b = TlsOptions(Certificates().job2);
  a.job_token = b.job_token = *JobToken::FromSecret("tcp-test-job-token-0123456789");
  absl::StatusOr<std::unique_ptr<Transport>> t1;
  std::thread rank1([&] { t1 = ConnectTcpTransport(1, 2, kv, b); });
  auto t0 = ConnectTcpTransport(0, 2, kv, a);
  rank1.join();
  ASSERT_TRUE(t0.ok()) << t0.status();
  ASSERT_TRUE(t1.ok()) << t1.status();
  const std::vector<char> x = Pattern(1 << 20, 3);
  std::vector<char> y(x.size());
  PendingOps ops;
  (*t1)->RecvAsync(0, 1, y.data(), y.size(), ops.Add());
  (*t0)->SendAsync(1, 1, x.data(), x.size(), ops.Add());
  EXPECT_TRUE(ops.Wait().ok());
  EXPECT_TRUE(x == y);
}

// A rank whose certificate is of another CA fails set-up, and so does the
// rank it meets, naming it.
TEST(TcpTransportTlsTest, AForeignCertificateIsRefusedNamingTheRank) {
  for (int foreign_rank : {0, 1}) {
    SCOPED_TRACE(absl::StrCat("foreign rank ", foreign_rank));
    InMemoryKeyValueStore kv;
    std::vector<absl::StatusOr<std::unique_ptr<Transport>>> t(2);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 2; ++r) {
      ranks.emplace_back([&, r] {
        TcpTransportOptions o =
            TlsOptions(r == foreign_rank ? Certificates().foreign : Certificates().job);
        o.connect_timeout = absl::Seconds(10);
        t[r] = ConnectTcpTransport(r, 2, kv, o);
      });
    }
    for (auto& th : ranks) th.join();
    const int honest = 1 - foreign_rank;
    EXPECT_TRUE(absl::IsUnauthenticated(t[honest].status())) << t[honest].status();
    EXPECT_THAT(std::string(t[honest].status().message()),
                HasSubstr(absl::StrCat("TLS handshake with rank ", foreign_rank, " (127.0.0.1:")));
    EXPECT_FALSE(t[foreign_rank].ok());
  }
}

// A rank without TLS meeting one with: both fail, neither hangs.
TEST(TcpTransportTlsTest, APlaintextRankFailsSetUp) {
  InMemoryKeyValueStore kv;
  TcpTransportOptions plain = Options(), tls = TlsOptions();
  plain.connect_timeout = tls.connect_timeout = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<Transport>> t1;
  std::thread rank1([&] { t1 = ConnectTcpTransport(1, 2, kv, plain); });
  auto t0 = ConnectTcpTransport(0, 2, kv, tls);
  rank1.join();
  EXPECT_FALSE(t0.ok());
  // The plaintext rank connected before TLS began; its first exchange fails.
  if (t1.ok()) {
    char x = 1;
    EXPECT_FALSE(Send(**t1, 0, 1, &x, 1).ok());
  }
}

// A peer that completes the handshake and then sends bad frames: the
// communicator aborts with DataLoss naming it; nothing is allocated for the
// absurd size.
TEST(TcpTransportTest, MalformedFramesAbortNamingThePeer) {
  struct Header {
    uint32_t magic, kind;
    uint64_t tag, bytes;
    uint32_t code, reserved;
  };
  const Header bad_magic{0xdeadbeef, 1, 0, 4, 0, 0};
  const Header absurd{0x46505453, 1, 3, uint64_t{1} << 40, 0, 0};
  const Header unrequested{0x46505453, 3, 3, uint64_t{1} << 40, 0, 0};
  for (const Header& h : {bad_magic, absurd, unrequested}) {
    InMemoryKeyValueStore kv;
    absl::StatusOr<std::unique_ptr<Transport>> t1;
    std::thread rank1([&] { t1 = ConnectTcpTransport(1, 2, kv, Options()); });
    auto address = kv.Get("test/tcp/addr/1", absl::Seconds(10));
    ASSERT_TRUE(address.ok());
    const int fd = ConnectRaw(*address);
    struct {
      uint32_t magic = 0x4c485453, version = 1;
      uint64_t comm = TcpCommunicatorId("test/tcp#2");
      int32_t rank = 0, size = 2;
    } hello;
    ASSERT_EQ(send(fd, &hello, sizeof(hello), MSG_NOSIGNAL), 24);
    rank1.join();
    ASSERT_TRUE(t1.ok()) << t1.status();
    char reply[24];
    ASSERT_EQ(recv(fd, reply, sizeof(reply), MSG_WAITALL), 24);
    PendingOps ops;
    std::vector<char> buf(64);
    (*t1)->RecvAsync(0, 3, buf.data(), buf.size(), ops.Add());
    ASSERT_EQ(send(fd, &h, sizeof(h), MSG_NOSIGNAL), 32);
    const absl::Status s = ops.Wait();
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0 sent"));
    close(fd);
  }
}

// ---- Waits that drive the sockets (DriveUntil) ----

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

TEST(TcpTransportDriveTest, EverySizeBothWays) { DrivenEverySizeBothWays(Options()); }

// Several threads of each rank wait at once: one drives, the others sleep
// until their operations are done or take over when it leaves.
TEST(TcpTransportDriveTest, ConcurrentDrivenWaitsOnOneTransport) {
  constexpr int kThreads = 4, kRounds = 30;
  InMemoryKeyValueStore kv;
  auto t = ConnectThreads(2, kv);
  ASSERT_TRUE(t[0] && t[1]);
  std::vector<absl::Status> status(2 * kThreads);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < kThreads; ++k) {
      threads.emplace_back([&, r, k] {
        for (int round = 0; round < kRounds && status[r * kThreads + k].ok(); ++round) {
          const size_t bytes = (round + k) % 3 == 0 ? (300 << 10) + k : 100 + round;
          const uint64_t tag = k * 1000 + round;
          std::vector<char> out = Pattern(bytes, r * 100 + k + round), in(bytes);
          absl::Status s = Drive(*t[r], [&](const AddOp& add) {
            t[r]->RecvAsync(1 - r, tag, in.data(), bytes, add());
            t[r]->SendAsync(1 - r, tag, out.data(), bytes, add());
          });
          if (s.ok() && in != Pattern(bytes, (1 - r) * 100 + k + round)) {
            s = absl::InternalError(absl::StrCat("round ", round, ": wrong bytes"));
          }
          status[r * kThreads + k] = s;
        }
      });
    }
  }
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < status.size(); ++i)
    EXPECT_TRUE(status[i].ok()) << "thread " << i << ": " << status[i];
}

// A driven wait leaves the I/O thread idle; operations waited for the plain
// way afterwards (PendingOps) must still move, eager and rendezvous alike,
// whether the message or the receive comes first.
TEST(TcpTransportDriveTest, PlainWaitsAfterADrivenOne) {
  InMemoryKeyValueStore kv;
  auto t = ConnectThreads(2, kv);
  ASSERT_TRUE(t[0] && t[1]);
  std::vector<char> a = Pattern(1000, 1), b(1000);
  std::thread peer([&] {
    EXPECT_TRUE(
        Drive(*t[1], [&](const AddOp& add) { t[1]->RecvAsync(0, 1, b.data(), 1000, add()); }).ok());
  });
  EXPECT_TRUE(
      Drive(*t[0], [&](const AddOp& add) { t[0]->SendAsync(1, 1, a.data(), 1000, add()); }).ok());
  peer.join();
  EXPECT_TRUE(a == b);
  for (size_t bytes : {size_t{100}, size_t{2} << 20}) {
    std::vector<char> x = Pattern(bytes, 5), y(bytes);
    // The sender's wait returns before the receive is posted (eager).
    if (bytes <= 100) {
      ASSERT_TRUE(Send(*t[0], 1, 2 + bytes, x.data(), bytes).ok());
    }
    std::thread receiver([&] { EXPECT_TRUE(Recv(*t[1], 0, 2 + bytes, y.data(), bytes).ok()); });
    if (bytes > 100) {
      EXPECT_TRUE(Send(*t[0], 1, 2 + bytes, x.data(), bytes).ok());
    }
    receiver.join();
    EXPECT_TRUE(x == y) << bytes << " bytes";
  }
}

TEST(TcpTransportDriveTest, AbortEndsADrivenWait) {
  InMemoryKeyValueStore kv;
  auto t = ConnectThreads(2, kv);
  ASSERT_TRUE(t[0] && t[1]);
  std::vector<char> buf(1 << 20);
  std::thread aborter([&] { t[0]->Abort(absl::CancelledError("step 3 cancelled")); });
  const absl::Status s = Drive(*t[0], [&](const AddOp& add) {
    t[0]->RecvAsync(1, 1, buf.data(), 10, add());
    t[0]->RecvAsync(1, 2, buf.data(), buf.size(), add());
  });
  aborter.join();
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_EQ(s.message(), "step 3 cancelled");
  // The peer hears of it too, while driving.
  const absl::Status peer =
      Drive(*t[1], [&](const AddOp& add) { t[1]->RecvAsync(0, 9, buf.data(), 10, add()); });
  EXPECT_EQ(peer.message(), "step 3 cancelled");
}

// ---- Ranks as processes ----

// Runs `body(rank)` in `n - 1` forked children (ranks 1..n-1) and in this
// process (rank 0); a child reports through its exit code.
void RunProcesses(int n, const std::function<absl::Status(int)>& body,
                  std::vector<pid_t>* kids_out = nullptr,
                  const std::function<void(const std::vector<pid_t>&)>& parent_body = nullptr) {
  std::vector<pid_t> kids;
  for (int r = 1; r < n; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const absl::Status s = body(r);
      if (!s.ok()) fprintf(stderr, "rank %d: %s\n", r, s.ToString().c_str());
      _exit(s.ok() ? 0 : 1);
    }
    kids.push_back(pid);
  }
  if (parent_body) {
    parent_body(kids);
  } else {
    const absl::Status s = body(0);
    EXPECT_TRUE(s.ok()) << "rank 0: " << s;
  }
  for (pid_t pid : kids) {
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    if (kids_out == nullptr) {
      EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
    }
  }
}

std::string TempDir() { return io::MakeTempDir("kv").value_or("/tmp"); }

TEST(TcpTransportProcessTest, MessagesAndRingAllReduce) {
  for (int n : {2, 3}) {
    const std::string dir = TempDir();
    RunProcesses(n, [&](int r) -> absl::Status {
      FileKeyValueStore kv(dir);
      auto t = ConnectTcpTransport(r, n, kv, Options());
      if (!t.ok()) return t.status();
      Transport& tr = **t;
      uint64_t tag = 100;
      for (size_t bytes : kSizes) {
        ++tag;
        // Rank r sends to r+1 and receives from r-1, eagerly or by request.
        const std::vector<char> mine = Pattern(bytes, r);
        std::vector<char> got(bytes);
        PendingOps ops;
        tr.SendAsync((r + 1) % n, tag, mine.data(), bytes, ops.Add());
        tr.RecvAsync((r + n - 1) % n, tag, got.data(), bytes, ops.Add());
        if (absl::Status s = ops.Wait(); !s.ok()) return s;
        if (got != Pattern(bytes, (r + n - 1) % n)) return absl::InternalError("wrong bytes");
      }
      for (int64_t count : {int64_t{7}, int64_t{1} << 20}) {
        if (absl::Status s = RingAllReduce(tr, count); !s.ok()) return s;
      }
      return absl::OkStatus();
    });
  }
}

TEST(TcpTransportProcessTest, KilledPeerFailsPendingOpsNamingIt) {
  const std::string dir = TempDir();
  std::vector<pid_t> kids;
  RunProcesses(
      2,
      [&](int r) -> absl::Status {
        FileKeyValueStore kv(dir);
        auto t = ConnectTcpTransport(r, 2, kv, Options());
        if (!t.ok()) return t.status();
        pause();  // until killed
        return absl::OkStatus();
      },
      &kids,
      [&](const std::vector<pid_t>& children) {
        FileKeyValueStore kv(dir);
        auto t = ConnectTcpTransport(0, 2, kv, Options());
        ASSERT_TRUE(t.ok()) << t.status();
        std::vector<char> buf(1 << 20);
        PendingOps small, large;
        (*t)->RecvAsync(1, 1, buf.data(), 10, small.Add());
        (*t)->RecvAsync(1, 2, buf.data(), buf.size(), large.Add());
        kill(children[0], SIGKILL);
        for (PendingOps* ops : {&small, &large}) {
          const absl::Status s = ops->Wait();
          EXPECT_TRUE(absl::IsUnavailable(s)) << s;
          EXPECT_THAT(std::string(s.message()), HasSubstr("connection to rank 1"));
        }
        EXPECT_TRUE(absl::IsUnavailable(Send(**t, 1, 3, buf.data(), 10)));
      });
}

// A peer that dies while this rank's thread drives the sockets: the driven
// wait ends with an error naming that peer, for a receive in progress too.
TEST(TcpTransportProcessTest, KilledPeerEndsADrivenWaitNamingIt) {
  const std::string dir = TempDir();
  std::vector<pid_t> kids;
  RunProcesses(
      2,
      [&](int r) -> absl::Status {
        FileKeyValueStore kv(dir);
        auto t = ConnectTcpTransport(r, 2, kv, Options());
        if (!t.ok()) return t.status();
        // Half of a 1 MiB message, then nothing until killed.
        std::vector<char> buf(1 << 20);
        PendingOps ops;
        (*t)->SendAsync(0, 2, buf.data(), buf.size() / 2, ops.Add());
        (void)ops.Wait();
        pause();
        return absl::OkStatus();
      },
      &kids,
      [&](const std::vector<pid_t>& children) {
        FileKeyValueStore kv(dir);
        auto t = ConnectTcpTransport(0, 2, kv, Options());
        ASSERT_TRUE(t.ok()) << t.status();
        std::vector<char> buf(1 << 20);
        std::thread killer([&] {
          // Once the half message is here, the peer dies.
          std::vector<char> half(buf.size() / 2);
          EXPECT_TRUE(Recv(**t, 1, 2, half.data(), half.size()).ok());
          kill(children[0], SIGKILL);
        });
        const absl::Status s = Drive(**t, [&](const AddOp& add) {
          (*t)->RecvAsync(1, 1, buf.data(), 10, add());
          (*t)->RecvAsync(1, 3, buf.data(), buf.size(), add());
        });
        killer.join();
        EXPECT_TRUE(absl::IsUnavailable(s)) << s;
        EXPECT_THAT(std::string(s.message()), HasSubstr("connection to rank 1"));
      });
}

// A rank that finishes and destroys its transport is not a crash: the others
// go on with each other, and only operations with it fail.
TEST(TcpTransportTest, CleanCloseFailsOnlyThatPeer) {
  InMemoryKeyValueStore kv;
  auto t = ConnectThreads(3, kv);
  for (auto& x : t) ASSERT_TRUE(x);
  PendingOps pending;
  char c = 0;
  t[1]->RecvAsync(0, 1, &c, 1, pending.Add());
  t[0].reset();
  const absl::Status s = pending.Wait();
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("rank 0"));
  std::vector<char> big = Pattern(1 << 20, 3), got(1 << 20);
  PendingOps ops;
  t[2]->RecvAsync(1, 2, got.data(), got.size(), ops.Add());
  t[1]->SendAsync(2, 2, big.data(), big.size(), ops.Add());
  EXPECT_TRUE(ops.Wait().ok());
  EXPECT_TRUE(got == big);
}

}  // namespace
}  // namespace strata
