// TcpTransport with a job token and with TLS (issue 23): only peers that
// prove the token get in; over TLS every scenario of the plain tests passes,
// and a foreign certificate or a plaintext rank is refused naming the rank.
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/collective/transport/tcp_socket.h"
#include "runtime/collective/transport/tcp_transport.h"
#include "runtime/collective/transport/tcp_transport_test_util.h"
#include "runtime/coordination/key_value_store.h"
#include "runtime/security/test_certs.h"
#include "runtime/security/tls.h"

namespace strata {
namespace {

using tcp_test::ConcurrentTagsInAnyOrder;
using tcp_test::ConnectRaw;
using tcp_test::ConnectThreads;
using tcp_test::DrivenEverySizeBothWays;
using tcp_test::EverySizeInEitherOrder;
using tcp_test::Options;
using tcp_test::Pattern;
using tcp_test::Recv;
using tcp_test::RingAllReduceOverThreads;
using tcp_test::Send;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace strata
