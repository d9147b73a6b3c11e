// Simulated hosts for end-to-end tests: network namespaces joined by a veth
// pair (NetnsPair), and processes started inside one (SpawnInNamespace).
// Tests that use them need root and `ip netns` (iproute2) and run outside
// Bazel's sandbox (tag no-sandbox: `ip netns add` mounts under /run/netns);
// where namespaces cannot be made, NetnsPair::unavailable() says why and the
// test skips with it.
//
//   NetnsPair net;
//   if (!net.unavailable().empty()) GTEST_SKIP() << net.unavailable();
//   Process p = SpawnInNamespace(net.name(1), Absolute(Runfile("tools/trainer")), args,
//                                dir + "/stderr.txt", {"TF_CONFIG=..."});
//   Shell("ip -n " + net.name(1) + " link set " + net.veth(1) + " down", &err);
//   Exit e = WaitWithin(p, 60, "worker 1");
//
// Not thread-safe: one test thread.
#ifndef STRATA_TESTS_NETNS_H_
#define STRATA_TESTS_NETNS_H_

#include <string>
#include <vector>

#include "tests/trainer_process.h"

namespace strata {
namespace testing {

// Runs `command` through the shell; returns its exit status, its stderr in
// `*err`.
int Shell(const std::string& command, std::string* err);

// Two network namespaces ("hosts") joined by a veth pair, 10.a.b.1/24 in the
// first and 10.a.b.2/24 in the second, loopback up in both. Names carry this
// process's id and a random tag, the /24 is drawn at random in 10.200-250.x,
// so concurrent runs do not collide. Destroyed (namespaces and veths) by the
// destructor, also when a test fails half-way.
class NetnsPair {
 public:
  NetnsPair();
  ~NetnsPair();
  NetnsPair(const NetnsPair&) = delete;
  NetnsPair& operator=(const NetnsPair&) = delete;

  // Empty when the namespaces are ready; else why not.
  const std::string& unavailable() const { return unavailable_; }
  const std::string& name(int i) const { return names_[i]; }
  const std::string& host(int i) const { return hosts_[i]; }
  const std::string& veth(int i) const { return veth_[i]; }

 private:
  std::string names_[2];
  std::string hosts_[2];
  std::string veth_[2];
  std::string unavailable_;
  std::vector<std::string> created_;  // namespaces to delete
};

// `n` hosts (2..16) on one switch: a network namespace each, plus one for
// the switch (a Linux bridge), every host joined to it by a veth pair; host
// i is 10.a.b.(i+1)/24 on its end, `veth(i)`. Taking a host's veth down
// cuts that host off from all the others. Names and the /24 are drawn as
// NetnsPair's; the destructor removes everything.
class NetnsHosts {
 public:
  explicit NetnsHosts(int n);
  ~NetnsHosts();
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  const std::string& unavailable() const { return unavailable_; }
  int size() const { return static_cast<int>(names_.size()); }
  const std::string& name(int i) const { return names_[i]; }
  const std::string& host(int i) const { return hosts_[i]; }
  const std::string& veth(int i) const { return veth_[i]; }

 private:
  std::vector<std::string> names_, hosts_, veth_;
  std::string switch_;
  std::string unavailable_;
  std::vector<std::string> created_;  // namespaces to delete
};

// `path` made absolute against the current directory (a namespace's
// process starts where the test runs, but `ip netns exec` needs a path).
std::string Absolute(const std::string& path);

// Starts `program` (an absolute path) with `args` inside namespace `ns`
// (`ip netns exec`, which execs it in place: the pid is the program's),
// stderr to `stderr_path` (stdout to StdoutPathFor(stderr_path)), with
// `env` ("NAME=value") added to or replacing entries of this process's
// environment, plus the test's job token unless `env` has one.
Process SpawnInNamespace(const std::string& ns, const std::string& program,
                         const std::vector<std::string>& args, const std::string& stderr_path,
                         const std::vector<std::string>& env);

// Waits for `p` up to `seconds`; past that kills it (SIGKILL) and fails the
// test: a hang detector with room for a loaded machine, not a timing.
Exit WaitWithin(const Process& p, double seconds, const std::string& who);

}  // namespace testing
}  // namespace strata

#endif  // STRATA_TESTS_NETNS_H_
