#include "runtime/security/tls.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/security/test_certs.h"

namespace strata {
namespace {

using ::testing::HasSubstr;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = io::MakeTempDir("tls_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    auto ca = MakeTestCa(dir_, "job");
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_ = *ca;
    auto a = MakeTestCert(ca_, "a", "DNS:localhost,IP:127.0.0.1");
    ASSERT_TRUE(a.ok()) << a.status();
    a_ = *a;
    auto b = MakeTestCert(ca_, "b", "DNS:localhost,IP:127.0.0.1");
    ASSERT_TRUE(b.ok()) << b.status();
    b_ = *b;
    auto other_ca = MakeTestCa(dir_, "other");
    ASSERT_TRUE(other_ca.ok()) << other_ca.status();
    auto foreign = MakeTestCert(*other_ca, "foreign", "DNS:localhost,IP:127.0.0.1");
    ASSERT_TRUE(foreign.ok()) << foreign.status();
    foreign_ = *foreign;
  }

  std::shared_ptr<const TlsContext> Context(const TlsFiles& f) {
    auto c = LoadTlsConfig(f);
    EXPECT_TRUE(c.ok()) << c.status();
    auto ctx = TlsContext::Create(*c);
    EXPECT_TRUE(ctx.ok()) << ctx.status();
    return *ctx;
  }

  std::string Write(const std::string& name, const std::string& contents) {
    const std::string path = io::JoinPath(dir_, name);
    EXPECT_TRUE(io::WriteFileAtomically(path, contents).ok());
    return path;
  }

  // Shakes hands over a socketpair: `client` checks the server's
  // certificate names `host`. The two sides' results.
  std::pair<absl::Status, absl::Status> Shake(const TlsFiles& client, const TlsFiles& server,
                                              const std::string& host,
                                              std::unique_ptr<TlsStream>* c_out = nullptr,
                                              std::unique_ptr<TlsStream>* s_out = nullptr) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    fds_.push_back(sv[0]);
    fds_.push_back(sv[1]);
    auto cc = Context(client);
    auto sc = Context(server);
    std::unique_ptr<TlsStream> c = cc->NewStream(sv[0], /*is_client=*/true, host);
    std::unique_ptr<TlsStream> s = sc->NewStream(sv[1], /*is_client=*/false, "");
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    absl::Status server_status;
    std::thread t([&] { server_status = TlsHandshakeAll({s.get()}, {"the client"}, deadline); });
    absl::Status client_status = TlsHandshakeAll({c.get()}, {"the server"}, deadline);
    t.join();
    if (c_out) *c_out = std::move(c);
    if (s_out) *s_out = std::move(s);
    return {client_status, server_status};
  }

  void TearDown() override {
    for (int fd : fds_) close(fd);
  }

  std::string dir_;
  TestCa ca_;
  TlsFiles a_, b_, foreign_;
  std::vector<int> fds_;
};

TEST_F(TlsTest, LoadsAndChecksTheFiles) {
  EXPECT_TRUE(LoadTlsConfig(a_).ok());

  TlsFiles missing = a_;
  missing.ca_file.clear();
  EXPECT_THAT(LoadTlsConfig(missing).status().message(), HasSubstr("--tls_ca_file is not given"));

  TlsFiles absent = a_;
  absent.key_file = io::JoinPath(dir_, "nope.key");
  absl::Status s = LoadTlsConfig(absent).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("nope.key"));

  TlsFiles garbage = a_;
  garbage.cert_file = Write("garbage.crt", "not a certificate\n");
  s = LoadTlsConfig(garbage).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("garbage.crt holds no PEM certificate"));

  TlsFiles dir = a_;
  dir.ca_file = dir_;
  EXPECT_THAT(LoadTlsConfig(dir).status().message(), HasSubstr("is not a regular file"));

  TlsFiles wrong_key = a_;
  wrong_key.key_file = b_.key_file;
  EXPECT_THAT(LoadTlsConfig(wrong_key).status().message(),
              HasSubstr("b.key is not the private key of --tls_cert_file"));

  TlsFiles other_ca = a_;
  other_ca.ca_file = foreign_.ca_file;
  EXPECT_THAT(LoadTlsConfig(other_ca).status().message(),
              HasSubstr("does not verify against --tls_ca_file"));

  TlsFiles no_key = a_;
  no_key.key_file = a_.cert_file;
  EXPECT_THAT(LoadTlsConfig(no_key).status().message(), HasSubstr("holds no unencrypted PEM"));
}

TEST_F(TlsTest, ResolvesFromTheEnvironment) {
  unsetenv(kTlsCertFileEnv);
  unsetenv(kTlsKeyFileEnv);
  unsetenv(kTlsCaFileEnv);
  auto none = ResolveTls(TlsFiles{});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  setenv(kTlsCertFileEnv, a_.cert_file.c_str(), 1);
  setenv(kTlsKeyFileEnv, a_.key_file.c_str(), 1);
  EXPECT_THAT(ResolveTls(TlsFiles{}).status().message(), HasSubstr("--tls_ca_file is not given"));
  setenv(kTlsCaFileEnv, a_.ca_file.c_str(), 1);
  auto all = ResolveTls(TlsFiles{});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_TRUE(all->has_value());
  EXPECT_EQ((*all)->files.cert_file, a_.cert_file);
  // A flag wins over the environment.
  auto flag = ResolveTls(TlsFiles{b_.cert_file, b_.key_file, ""});
  ASSERT_TRUE(flag.ok()) << flag.status();
  EXPECT_EQ((*flag)->files.cert_file, b_.cert_file);
  unsetenv(kTlsCertFileEnv);
  unsetenv(kTlsKeyFileEnv);
  unsetenv(kTlsCaFileEnv);
}

// Writes all of `data` through `w` while `r` reads it; what `r` read.
std::string Pump(TlsStream& w, int wfd, TlsStream& r, int rfd, const std::vector<iovec>& iov) {
  size_t total = 0;
  for (const iovec& v : iov) total += v.iov_len;
  std::string got(total, '\0');
  std::thread reader([&] {
    size_t have = 0;
    while (have < total) {
      const iovec v{got.data() + have, std::min<size_t>(total - have, 5000)};
      const ssize_t n = r.Readv(&v, 1);
      if (n > 0) {
        have += static_cast<size_t>(n);
        continue;
      }
      ASSERT_TRUE(n < 0 && errno == EAGAIN) << n << " " << r.error();
      pollfd p{rfd, POLLIN, 0};
      poll(&p, 1, 1000);
    }
  });
  std::vector<iovec> left = iov;
  size_t first = 0;
  while (first < left.size()) {
    const ssize_t n = w.Writev(left.data() + first, static_cast<int>(left.size() - first));
    if (n < 0) {
      EXPECT_EQ(errno, EAGAIN) << w.error();
      if (errno != EAGAIN) break;
      pollfd p{wfd, POLLOUT, 0};
      poll(&p, 1, 1000);
      continue;
    }
    size_t k = static_cast<size_t>(n);
    while (k > 0) {
      const size_t step = std::min(k, left[first].iov_len);
      left[first].iov_base = static_cast<char*>(left[first].iov_base) + step;
      left[first].iov_len -= step;
      k -= step;
      if (left[first].iov_len == 0) ++first;
    }
  }
  reader.join();
  return got;
}

TEST_F(TlsTest, PeersOfOneCaTalk) {
  std::unique_ptr<TlsStream> c, s;
  auto [cs, ss] = Shake(a_, b_, "localhost", &c, &s);
  ASSERT_TRUE(cs.ok()) << cs;
  ASSERT_TRUE(ss.ok()) << ss;
  // Small and large pieces, as the transport's frames are: more than the
  // socket buffer holds, so writes meet a full socket and are retried.
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + (i >> 12));
  std::string header(32, 'h'), small(1000, 's');
  std::vector<iovec> iov = {{header.data(), header.size()}, {small.data(), small.size()},
                            {header.data(), header.size()}, {big.data(), big.size()},
                            {header.data(), header.size()}, {small.data(), small.size()}};
  const std::string want = header + small + header + big + header + small;
  EXPECT_TRUE(Pump(*c, fds_[0], *s, fds_[1], iov) == want);
  EXPECT_TRUE(Pump(*s, fds_[1], *c, fds_[0], iov) == want);

  // Closing one end reads as the end of the stream at the other.
  shutdown(fds_[0], SHUT_RDWR);
  char b;
  const iovec v{&b, 1};
  ssize_t n;
  for (int i = 0; i < 100 && (n = s->Readv(&v, 1)) < 0 && errno == EAGAIN; ++i) {
    pollfd p{fds_[1], POLLIN, 0};
    poll(&p, 1, 100);
  }
  EXPECT_EQ(n, 0);
}

TEST_F(TlsTest, AServerOfAnotherCaIsRefused) {
  auto [cs, ss] = Shake(a_, foreign_, "localhost");
  EXPECT_EQ(cs.code(), absl::StatusCode::kUnauthenticated) << cs;
  EXPECT_THAT(cs.message(), HasSubstr("TLS handshake with the server failed"));
  EXPECT_THAT(cs.message(), HasSubstr("certificate was refused"));
  EXPECT_FALSE(ss.ok());
}

TEST_F(TlsTest, AClientOfAnotherCaIsRefused) {
  auto [cs, ss] = Shake(foreign_, a_, "localhost");
  EXPECT_EQ(ss.code(), absl::StatusCode::kUnauthenticated) << ss;
  EXPECT_THAT(ss.message(), HasSubstr("TLS handshake with the client failed"));
  // The client finished its half first (TLS 1.3), and learns of the
  // refusal at set-up all the same.
  EXPECT_EQ(cs.code(), absl::StatusCode::kUnauthenticated) << cs;
}

TEST_F(TlsTest, AServerMustNameTheHostReached) {
  auto [cs, ss] = Shake(a_, b_, "10.9.8.7");
  EXPECT_EQ(cs.code(), absl::StatusCode::kUnauthenticated) << cs;
  EXPECT_THAT(cs.message(), HasSubstr("IP address mismatch"));
  auto [cs2, ss2] = Shake(a_, b_, "node7.example");
  EXPECT_THAT(cs2.message(), HasSubstr("hostname mismatch"));
}

TEST_F(TlsTest, APeerThatSpeaksNoTlsFailsTheHandshakeByTheDeadline) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  fds_.push_back(sv[0]);
  fds_.push_back(sv[1]);
  auto s = Context(a_)->NewStream(sv[1], /*is_client=*/false, "");
  // Silence: the deadline names the peer.
  absl::Status st = TlsHandshakeAll({s.get()}, {"rank 3"}, absl::Now() + absl::Milliseconds(300));
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_THAT(st.message(), HasSubstr("rank 3"));
  // Garbage: refused at once.
  ASSERT_EQ(write(sv[0], "GET / HTTP/1.0\r\n\r\n", 18), 18);
  st = TlsHandshakeAll({s.get()}, {"rank 3"}, absl::Now() + absl::Seconds(10));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
  EXPECT_THAT(st.message(), HasSubstr("rank 3"));
}

}  // namespace
}  // namespace strata
