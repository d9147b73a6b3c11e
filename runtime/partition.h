// Partitioning: splits a placed step graph into one graph per device. An edge
// between devices becomes a _Send on the producer's device and a _Recv on the
// consumer's, meeting in the step's rendezvous under a key made of both
// device names, the sender's incarnation and the tensor's name. A tensor
// crossing to one device is sent once however many nodes there consume it.
// A control edge between devices becomes a dummy scalar sent after the
// control source ran, whose _Recv then precedes the control destination.
//
//   absl::StatusOr<std::vector<Partition>> parts = PartitionGraph(placed_graph, device_mgr);
//   for (Partition& p : *parts) Executor::Create(*p.graph, p.device);
//
// Requires every node to have an assigned device of `devices` (PlaceGraph).
// Thread-safety: reentrant; `g` is only read. Ownership: each Partition owns
// its graph; devices belong to the DeviceMgr.
#ifndef STRATA_RUNTIME_PARTITION_H_
#define STRATA_RUNTIME_PARTITION_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph.h"
#include "runtime/device.h"

namespace strata {

struct Partition {
  Device* device = nullptr;
  std::unique_ptr<Graph> graph;
};

// One partition per device that has nodes, in the DeviceMgr's device order.
// InvalidArgument naming a node whose assigned device is not in `devices`.
absl::StatusOr<std::vector<Partition>> PartitionGraph(const Graph& g, const DeviceMgr& devices);

}  // namespace strata

#endif  // STRATA_RUNTIME_PARTITION_H_
