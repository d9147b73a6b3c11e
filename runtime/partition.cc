#include "runtime/partition.h"

#include <string>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/attr_value.h"
#include "runtime/subgraph.h"

namespace strata {

namespace {

void SetSendRecvAttrs(::tensorflow::NodeDef* def, const std::string& tensor_name,
                      const Device& from, const Device& to) {
  auto& a = *def->mutable_attr();
  a["tensor_name"] = MakeAttr(tensor_name);
  a["send_device"] = MakeAttr(from.name());
  a["send_device_incarnation"] = MakeAttr(static_cast<int64_t>(from.incarnation()));
  a["recv_device"] = MakeAttr(to.name());
  a["client_terminated"] = MakeAttr(false);
}

class Partitioner {
 public:
  Partitioner(const Graph& g, const DeviceMgr& devices) : g_(g), devices_(devices) {}

  absl::StatusOr<std::vector<Partition>> Run() {
    const std::vector<Device*>& devs = devices_.devices();
    absl::flat_hash_map<std::string, int> dev_index;
    for (size_t i = 0; i < devs.size(); ++i) dev_index[devs[i]->name()] = static_cast<int>(i);
    graphs_.resize(devs.size());
    node_dev_.assign(g_.num_node_ids(), -1);
    copy_.assign(g_.num_node_ids(), nullptr);

    // 1. Every node into its device's graph.
    for (Node* n : g_.nodes()) {
      auto it = dev_index.find(n->assigned_device_name());
      if (it == dev_index.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("node ", n->DebugString(), " is assigned to device '",
                         n->assigned_device_name(), "', which does not exist"));
      }
      node_dev_[n->id()] = it->second;
      STRATA_ASSIGN_OR_RETURN(copy_[n->id()], CopyNode(*n, GraphFor(it->second)));
    }

    // 2. Edges: kept within a device, Send/Recv across devices.
    for (Node* n : g_.nodes()) {
      const int dst_dev = node_dev_[n->id()];
      for (const Edge* e : n->in_edges()) {
        const int src_dev = node_dev_[e->src->id()];
        Node* dst = copy_[n->id()];
        if (src_dev == dst_dev) {
          if (e->IsControlEdge()) {
            graphs_[dst_dev]->AddControlEdge(copy_[e->src->id()], dst);
          } else {
            STRATA_RETURN_IF_ERROR(
                graphs_[dst_dev]->AddEdge(copy_[e->src->id()], e->src_output, dst, e->dst_input).status());
          }
          continue;
        }
        STRATA_ASSIGN_OR_RETURN(Node * recv, RecvFor(e, src_dev, dst_dev));
        if (e->IsControlEdge()) {
          graphs_[dst_dev]->AddControlEdge(recv, dst);
        } else {
          STRATA_RETURN_IF_ERROR(graphs_[dst_dev]->AddEdge(recv, 0, dst, e->dst_input).status());
        }
      }
    }

    std::vector<Partition> out;
    for (size_t i = 0; i < devs.size(); ++i) {
      if (graphs_[i] != nullptr) out.push_back(Partition{devs[i], std::move(graphs_[i])});
    }
    return out;
  }

 private:
  Graph* GraphFor(int dev) {
    if (graphs_[dev] == nullptr) {
      graphs_[dev] = std::make_unique<Graph>(g_.op_registry());
      *graphs_[dev]->mutable_versions() = g_.versions();
    }
    return graphs_[dev].get();
  }

  // The _Recv on `dst_dev` for the tensor (or control signal) of `e`, made
  // with its _Send on first use.
  absl::StatusOr<Node*> RecvFor(const Edge* e, int src_dev, int dst_dev) {
    const bool control = e->IsControlEdge();
    auto key = std::make_tuple(e->src->id(), control ? -1 : e->src_output, dst_dev);
    auto it = recvs_.find(key);
    if (it != recvs_.end()) return it->second;

    const Device& from = *devices_.devices()[src_dev];
    const Device& to = *devices_.devices()[dst_dev];
    Graph* sg = GraphFor(src_dev);
    Graph* rg = GraphFor(dst_dev);
    Node* src = copy_[e->src->id()];
    int src_output = e->src_output;
    DataType dtype;
    PartialTensorShape shape;
    std::string tensor_name;
    if (control) {
      // A control dependency carries no tensor; send a scalar made after
      // the source ran. int32, which lives in host memory on every device:
      // the signal never waits for a device-to-host copy (on a GPU that
      // would wait for every kernel enqueued before it).
      ::tensorflow::NodeDef c;
      c.set_name(sg->NewName(absl::StrCat(e->src->name(), "/_control_const")));
      c.set_op("Const");
      (*c.mutable_attr())["value"] = MakeAttr(Tensor::Scalar<int32_t>(0));
      (*c.mutable_attr())["dtype"] = MakeAttr(DT_INT32);
      STRATA_ASSIGN_OR_RETURN(Node * dummy, sg->AddNode(std::move(c)));
      dummy->set_assigned_device_name(from.name());
      dummy->set_output_shapes({TensorShape()});
      sg->AddControlEdge(src, dummy);
      src = dummy;
      src_output = 0;
      dtype = DT_INT32;
      shape = TensorShape();
      tensor_name = absl::StrCat(e->src->name(), ":control");
    } else {
      dtype = e->src->output_type(src_output);
      shape = e->src->output_shape(src_output);
      tensor_name = absl::StrCat(e->src->name(), ":", src_output);
    }

    ::tensorflow::NodeDef send;
    send.set_name(sg->NewName(absl::StrCat(e->src->name(), "/_send_", src_output, "_to_", to.parsed_name().type,
                                           "_", to.parsed_name().id)));
    send.set_op("_Send");
    send.set_device(from.name());
    (*send.mutable_attr())["T"] = MakeAttr(dtype);
    SetSendRecvAttrs(&send, tensor_name, from, to);
    STRATA_ASSIGN_OR_RETURN(Node * s, sg->AddNode(std::move(send)));
    s->set_assigned_device_name(from.name());
    STRATA_RETURN_IF_ERROR(sg->AddEdge(src, src_output, s, 0).status());

    ::tensorflow::NodeDef recv;
    recv.set_name(rg->NewName(absl::StrCat(e->src->name(), "/_recv_", src_output, "_from_",
                                           from.parsed_name().type, "_", from.parsed_name().id)));
    recv.set_op("_Recv");
    recv.set_device(to.name());
    (*recv.mutable_attr())["tensor_type"] = MakeAttr(dtype);
    SetSendRecvAttrs(&recv, tensor_name, from, to);
    STRATA_ASSIGN_OR_RETURN(Node * r, rg->AddNode(std::move(recv)));
    r->set_assigned_device_name(to.name());
    r->set_output_shapes({shape});
    recvs_.emplace(key, r);
    return r;
  }

  const Graph& g_;
  const DeviceMgr& devices_;
  std::vector<std::unique_ptr<Graph>> graphs_;  // by device index
  std::vector<int> node_dev_;                   // by node id of g_
  std::vector<Node*> copy_;                     // by node id of g_
  absl::flat_hash_map<std::tuple<int, int, int>, Node*> recvs_;
};

}  // namespace

absl::StatusOr<std::vector<Partition>> PartitionGraph(const Graph& g, const DeviceMgr& devices) {
  return Partitioner(g, devices).Run();
}

}  // namespace strata
