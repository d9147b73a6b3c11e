// TcpTransport on 127.0.0.1: ranks as threads of this process and as forked
// processes; matching in any order, eager and rendezvous sizes, concurrent
// tags, the ring all-reduce, waits that drive the sockets themselves
// (DriveUntil), and every failure a peer can cause. The job token and TLS:
// tcp_transport_security_test.cc.
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
#include "runtime/collective/transport/tcp_transport_test_util.h"
#include "runtime/coordination/key_value_store.h"

namespace strata {
namespace {

using tcp_test::AddOp;
using tcp_test::ConcurrentTagsInAnyOrder;
using tcp_test::ConnectRaw;
using tcp_test::ConnectThreads;
using tcp_test::Drive;
using tcp_test::DrivenEverySizeBothWays;
using tcp_test::EverySizeInEitherOrder;
using tcp_test::kSizes;
using tcp_test::Options;
using tcp_test::Pattern;
using tcp_test::Recv;
using tcp_test::RingAllReduce;
using tcp_test::RingAllReduceOverThreads;
using tcp_test::Send;
using ::testing::HasSubstr;

TEST(TcpTransportTest, KindRankSize) {
  InMemoryKeyValueStore kv;
  auto t = ConnectThreads(2, kv);
  ASSERT_TRUE(t[0] && t[1]);
  EXPECT_STREQ(t[0]->kind(), "tcp");
  EXPECT_EQ(t[0]->shared_workspace(), nullptr);  // no shared memory across hosts
  EXPECT_EQ(t[1]->rank(), 1);
  EXPECT_EQ(t[1]->size(), 2);
}


TEST(TcpTransportTest, EverySizeInEitherOrder) { EverySizeInEitherOrder(Options()); }


TEST(TcpTransportTest, ConcurrentTagsInAnyOrder) { ConcurrentTagsInAnyOrder(Options()); }


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
