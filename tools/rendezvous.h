// The elastic rendezvous of tools/launch (--nnodes=MIN:MAX): launchers of a
// job meet in rounds at the rendezvous endpoint; each round fixes which
// nodes take part and gives each its node rank and its tasks' first rank.
// The launcher that can bind the endpoint hosts the server (as torchrun's
// c10d rendezvous); every launcher, the host included, joins with
// JoinRendezvous.
//
//   auto server = RendezvousServer::Start({"10.0.0.1", 29500, token, 2, 4, absl::Seconds(10)});
//   absl::StatusOr<RendezvousRound> r =
//       JoinRendezvous("10.0.0.1", 29500, token, "node-a/1234", /*tasks=*/4, absl::Minutes(5));
//   r->round, r->node_rank, r->nnodes, r->world_size, r->first_rank
//
// A round closes as soon as `max_nodes` launchers joined it, or `last_call`
// after `min_nodes` did (so that a node lost for good is dropped after that
// grace period, and the survivors go on), and only once the hosting
// launcher joined; it is node 0, the others follow in join order. A
// launcher that joins while a round runs waits for the next one, which
// opens when the running round's launchers come back (their tasks failed
// and they restart): a node that comes back is admitted at the next
// restart. When the server stops (its launcher's job ended), launchers
// still waiting are told so and JoinRendezvous returns Cancelled.
//
// Wire protocol (one TCP connection per join, lines of text): the server
// sends "CHALLENGE <32 hex>"; the client "JOIN <node id> <tasks> <hmac>",
// the HMAC-SHA256 of the job token over the challenge and the request; the
// server, when the round closes, "ROUND <round> <node rank> <nodes>
// <world size> <first rank> <hmac>" over the challenge and the reply, so
// each side knows the other holds the token. Bad input (a line over 512
// bytes, a bad HMAC, garbage) closes that connection with "ERROR <why>",
// never the server; a connection silent for 10 s before joining is closed.
// Both ends probe idle connections (TCP keepalive), so a peer whose host is
// cut off ends the other's wait in about 25 s.
//
// Thread-safety: the server runs one thread of its own; JoinRendezvous may
// run on any thread. Ownership: the server owns its socket and thread.
#ifndef STRATA_TOOLS_RENDEZVOUS_H_
#define STRATA_TOOLS_RENDEZVOUS_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/security/job_token.h"

namespace strata {

struct RendezvousRound {
  int round = 0;       // 0, 1, ... (the tasks' chief meets at port + 1 + round)
  int node_rank = 0;   // this node's place in the round
  int nnodes = 0;      // nodes in the round
  int world_size = 0;  // tasks in the round, over every node
  int first_rank = 0;  // this node's first task's rank
};

struct RendezvousServerOptions {
  std::string host;
  int port = 0;
  JobToken token;
  int min_nodes = 1;
  int max_nodes = 1;
  absl::Duration last_call = absl::Seconds(10);
  // The hosting launcher's own node id: node rank 0 of every round (its
  // task 0, on the endpoint's host, hosts the tasks' coordination
  // service), and a round closes only once it joined, which it does when
  // its tasks of the previous round have ended.
  std::string host_node_id;
};

class RendezvousServer {
 public:
  // Binds host:port; Unavailable if it cannot (another launcher hosts it).
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(RendezvousServerOptions options);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

 private:
  RendezvousServer(RendezvousServerOptions options, int fd);
  void Loop();

  const RendezvousServerOptions options_;
  const int listen_fd_;
  int wake_[2] = {-1, -1};  // a pipe: the destructor stops the loop
  std::thread thread_;
};

// Joins the next round at host:port as `node_id` with `tasks` tasks;
// retries while the server is not up, up to `timeout`. Unavailable after
// the timeout, Unauthenticated for a server without the token, Cancelled
// when the job ended while this launcher waited.
absl::StatusOr<RendezvousRound> JoinRendezvous(const std::string& host, int port,
                                               const JobToken& token, const std::string& node_id,
                                               int tasks, absl::Duration timeout);

}  // namespace strata

#endif  // STRATA_TOOLS_RENDEZVOUS_H_
