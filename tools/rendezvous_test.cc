#include "tools/rendezvous.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tools/launch_lib.h"

namespace strata {
namespace {

JobToken Token(const std::string& s = "0123456789abcdef0123") { return *JobToken::FromSecret(s); }

int FreePort() {
  absl::StatusOr<std::vector<int>> p = PickFreePorts("127.0.0.1", 1);
  return p.ok() ? (*p)[0] : 0;
}

std::unique_ptr<RendezvousServer> Serve(int port, int min, int max, absl::Duration last_call,
                                        const std::string& host_node = "host") {
  absl::StatusOr<std::unique_ptr<RendezvousServer>> s = RendezvousServer::Start(
      {"127.0.0.1", port, Token(), min, max, last_call, host_node});
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

std::future<absl::StatusOr<RendezvousRound>> Join(int port, const std::string& node, int tasks,
                                                  const JobToken& token = Token()) {
  return std::async(std::launch::async, [=] {
    return JoinRendezvous("127.0.0.1", port, token, node, tasks, absl::Seconds(10));
  });
}

TEST(RendezvousTest, AFullRoundClosesAtOnceWithTheHostFirst) {
  const int port = FreePort();
  auto server = Serve(port, 1, 2, absl::Seconds(30));
  auto other = Join(port, "other", 3);
  usleep(100000);  // "other" joins first; the host still ranks first
  auto host = Join(port, "host", 2);
  absl::StatusOr<RendezvousRound> h = host.get(), o = other.get();
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(h->round, 0);
  EXPECT_EQ(h->node_rank, 0);
  EXPECT_EQ(h->first_rank, 0);
  EXPECT_EQ(o->node_rank, 1);
  EXPECT_EQ(o->first_rank, 2);
  EXPECT_EQ(o->nnodes, 2);
  EXPECT_EQ(o->world_size, 5);
  // The next round: numbered 1.
  auto again = Join(port, "host", 2);
  auto again_other = Join(port, "other", 3);
  EXPECT_EQ(again.get()->round, 1);
  EXPECT_EQ(again_other.get()->round, 1);
}

TEST(RendezvousTest, PastTheLastCallTheMinimumGoesOnAndLateComersWaitForTheNextRound) {
  const int port = FreePort();
  auto server = Serve(port, 1, 3, absl::Milliseconds(300));
  absl::StatusOr<RendezvousRound> alone = Join(port, "host", 1).get();
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_EQ(alone->nnodes, 1);
  // A node that comes now waits: the round closes only once the host is
  // back (its tasks of round 0 ended).
  auto late = Join(port, "late", 1);
  EXPECT_EQ(late.wait_for(std::chrono::milliseconds(800)), std::future_status::timeout);
  absl::StatusOr<RendezvousRound> host = Join(port, "host", 1).get();
  absl::StatusOr<RendezvousRound> l = late.get();
  ASSERT_TRUE(host.ok() && l.ok());
  EXPECT_EQ(host->round, 1);
  EXPECT_EQ(l->round, 1);
  EXPECT_EQ(l->nnodes, 2);
  EXPECT_EQ(l->node_rank, 1);
}

TEST(RendezvousTest, StrangersAndGarbageAreRefusedAndTheServerGoesOn) {
  const int port = FreePort();
  auto server = Serve(port, 2, 2, absl::Seconds(30));
  absl::StatusOr<RendezvousRound> stranger =
      Join(port, "x", 1, Token("another job's secret token")).get();
  ASSERT_FALSE(stranger.ok());
  EXPECT_EQ(stranger.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(absl::StrContains(stranger.status().message(), "not this job's token"));
  // Raw garbage on a connection.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string junk(4096, 'J');
  (void)!write(fd, junk.data(), junk.size());
  close(fd);
  // The job's own nodes still meet.
  auto h = Join(port, "host", 1);
  auto o = Join(port, "other", 1);
  EXPECT_TRUE(h.get().ok());
  EXPECT_TRUE(o.get().ok());
}

TEST(RendezvousTest, WaitingLaunchersLearnThatTheJobEnded) {
  const int port = FreePort();
  auto server = Serve(port, 2, 2, absl::Seconds(30));
  auto waiting = Join(port, "other", 1);
  usleep(200000);
  server.reset();
  absl::StatusOr<RendezvousRound> r = waiting.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  // Nobody there at all: Unavailable after the timeout.
  absl::StatusOr<RendezvousRound> none =
      JoinRendezvous("127.0.0.1", port, Token(), "n", 1, absl::Milliseconds(300));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
}

TEST(RendezvousTest, ParseNnodes) {
  int lo = -1, hi = -1;
  ASSERT_TRUE(ParseNnodes("4", &lo, &hi).ok());
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 4);
  ASSERT_TRUE(ParseNnodes("2:4", &lo, &hi).ok());
  EXPECT_EQ(lo, 2);
  EXPECT_EQ(hi, 4);
  for (const char* bad : {"", "0", "3:2", "0:2", "a:b", "2:", ":2", "1:2:3", "-1"}) {
    EXPECT_FALSE(ParseNnodes(bad, &lo, &hi).ok()) << bad;
  }
}

}  // namespace
}  // namespace strata
