// Placement: gives every node of a step graph a device of the DeviceMgr.
//
//   PlacementOptions opts;            // default device: the DeviceMgr's first
//   absl::Status s = PlaceGraph(graph, device_mgr, opts);
//   node->assigned_device_name();     // "/job:localhost/replica:0/task:0/device:CPU:1"
//
// Rules, in order:
//   1. A requested device (the node's `device`, full or partial, e.g. "/cpu:1")
//      is honoured: the first matching device with a kernel for the node
//      (the default device if it matches). InvalidArgument naming the node
//      and the device if the name is malformed, no device matches or no
//      matching device has a kernel (unless soft placement is allowed, which
//      falls through to rule 2). With host fallback, a node whose requested
//      device has no kernel for it (a GPU without an initializer's random
//      op) runs on a CPU of that device's task instead.
//   2. A node without a request runs where its first data input runs (the
//      tensor then needs no Send/Recv), if that device has a kernel for it.
//   3. An _Arg (a feed) runs where its first consumer runs.
//   4. Anything else runs on the default device, or failing a kernel there,
//      on the first device with one (NotFound naming the op if none has).
//
// Thread-safety: reentrant; `g` is modified (one thread). Ownership: nothing
// is kept.
#ifndef STRATA_RUNTIME_PLACEMENT_H_
#define STRATA_RUNTIME_PLACEMENT_H_

#include "absl/status/status.h"
#include "graph/graph.h"
#include "runtime/device.h"

namespace strata {

struct PlacementOptions {
  // nullptr: the DeviceMgr's first device.
  Device* default_device = nullptr;
  // A request that cannot be honoured (no such device, no kernel there)
  // falls back to the rules for unrequested nodes instead of failing.
  bool allow_soft_placement = false;
  // A request naming devices that exist but have no kernel for the node
  // runs on a CPU device of the same task (the host) that has one; a request
  // for a device that does not exist still fails. tf.distribute's soft
  // placement does this for ops without a GPU kernel; strategies set it.
  bool host_fallback_without_kernel = false;
};

absl::Status PlaceGraph(Graph* g, const DeviceMgr& devices, const PlacementOptions& opts);

}  // namespace strata

#endif  // STRATA_RUNTIME_PLACEMENT_H_
