#include "runtime/remote_rendezvous.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/status.h"
#include "runtime/device_name.h"

namespace strata {

uint64_t StableHash64(absl::string_view bytes, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

absl::StatusOr<std::string> TaskOfDevice(absl::string_view device) {
  STRATA_ASSIGN_OR_RETURN(DeviceName n, DeviceName::Parse(device));
  if (!n.IsFullySpecified()) {
    return absl::InvalidArgumentError(absl::StrCat("'", device, "' is not a full device name"));
  }
  return absl::StrCat("/job:", n.job, "/replica:", n.replica, "/task:", n.task);
}

TaskLinks::TaskLinks(Transport* t, std::vector<std::string> tasks)
    : transport_(t), tasks_(std::move(tasks)) {
  for (size_t r = 0; r < tasks_.size(); ++r) rank_[tasks_[r]] = static_cast<int>(r);
}

absl::StatusOr<TaskLinks> TaskLinks::Create(Transport* transport, std::vector<std::string> tasks) {
  if (transport == nullptr) return absl::InvalidArgumentError("TaskLinks: no transport");
  if (static_cast<int>(tasks.size()) != transport->size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TaskLinks: ", tasks.size(), " tasks for a transport of ", transport->size(), " ranks"));
  }
  absl::flat_hash_map<std::string, int> seen;
  for (const std::string& t : tasks) {
    auto n = DeviceName::Parse(t);
    if (!n.ok() || !n->has_job || !n->has_replica || !n->has_task || n->has_type) {
      return absl::InvalidArgumentError(
          absl::StrCat("TaskLinks: '", t, "' is not a task (/job:j/replica:r/task:t)"));
    }
    if (!seen.emplace(t, 0).second) {
      return absl::InvalidArgumentError(absl::StrCat("TaskLinks: task '", t, "' is named twice"));
    }
  }
  return TaskLinks(transport, std::move(tasks));
}

int TaskLinks::RankOf(absl::string_view task) const {
  auto it = rank_.find(task);
  return it == rank_.end() ? -1 : it->second;
}

namespace {

constexpr uint32_t kMagic = 0x53545252;  // "STRR"
constexpr int kMaxDims = 8;
constexpr uint32_t kDead = 1;

// The fixed-size header before a tensor's bytes (native byte order, as the
// transports' own frames).
struct WireHeader {
  uint32_t magic = kMagic;
  uint32_t flags = 0;
  int32_t dtype = 0;
  int32_t dims = 0;
  int64_t dim[kMaxDims] = {};
  uint64_t bytes = 0;
  uint64_t name_hash = 0;
};
static_assert(sizeof(WireHeader) == 96, "the header is part of the wire format");

std::string ShapeString(const WireHeader& h) {
  std::string s = "[";
  for (int i = 0; i < h.dims && i < kMaxDims; ++i) absl::StrAppend(&s, i ? "," : "", h.dim[i]);
  return s + "]";
}

// Why `h` is not acceptable for `spec` ("" if it is), before any allocation.
std::string CheckHeader(const WireHeader& h, uint64_t name_hash, const RemoteRecvSpec& spec,
                        uint64_t max_bytes, TensorShape* shape) {
  if (h.magic != kMagic) return "its header has a bad magic number";
  if (h.name_hash != name_hash) return "its header names another tensor";
  if (h.flags & kDead) return h.flags == kDead ? "" : "its header has unknown flags";
  if (h.flags != 0) return "its header has unknown flags";
  if (h.dims < 0 || h.dims > kMaxDims) return absl::StrCat("its header has rank ", h.dims);
  return CheckRemoteTensor(h.dtype, absl::MakeConstSpan(h.dim, h.dims), h.bytes, spec, max_bytes,
                           shape);
}

}  // namespace

std::string CheckRemoteTensor(int32_t dtype, absl::Span<const int64_t> dims, uint64_t bytes,
                              const RemoteRecvSpec& spec, uint64_t max_bytes, TensorShape* shape) {
  if (dtype != static_cast<int32_t>(spec.dtype)) {
    return absl::StrCat("the sender's dtype ", DataTypeString(static_cast<DataType>(dtype)),
                        " is not the ", DataTypeString(spec.dtype), " expected here");
  }
  if (dims.size() > static_cast<size_t>(kMaxDims)) return absl::StrCat("its rank is ", dims.size());
  absl::StatusOr<TensorShape> s = TensorShape::FromDims(dims);
  if (!s.ok()) return absl::StrCat("its shape [", absl::StrJoin(dims, ","), "] is invalid");
  if (!spec.shape.IsCompatibleWith(*s)) {
    return absl::StrCat("its shape ", s->DebugString(), " is not the ", spec.shape.DebugString(),
                        " expected here");
  }
  const uint64_t want = static_cast<uint64_t>(s->num_elements()) * DataTypeSize(spec.dtype);
  if (bytes != want) {
    return absl::StrCat("it has ", bytes, " bytes for a ", s->DebugString(), " ",
                        DataTypeString(spec.dtype));
  }
  if (!spec.shape.IsFullyDefined() && want > max_bytes) {
    return absl::StrCat("its ", want, " bytes exceed the bound of ", max_bytes);
  }
  *shape = *std::move(s);
  return "";
}

absl::Status ScanRecvsFromOtherTasks(const Graph& g, Device* device,
                                     const std::function<bool(const std::string&)>& is_local,
                                     bool* crosses, RemoteRecvSpecs* by_key) {
  for (Node* n : g.nodes()) {
    const bool send = n->IsOp("_Send");
    if (!send && !n->IsOp("_Recv")) continue;
    std::string peer;
    STRATA_RETURN_IF_ERROR(GetAttr(n->attrs(), send ? "recv_device" : "send_device", &peer));
    if (is_local(peer)) continue;
    *crosses = true;
    if (device->gpu_context() != nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          n->DebugString(), ": tensors between a GPU and another task's device are not carried "
          "yet; place the boundary on a CPU"));
    }
    if (send) continue;
    std::string tensor_name;
    int64_t incarnation = 0;
    STRATA_RETURN_IF_ERROR(GetAttr(n->attrs(), "tensor_name", &tensor_name));
    STRATA_RETURN_IF_ERROR(GetAttr(n->attrs(), "send_device_incarnation", &incarnation));
    RemoteRecvSpec spec;
    spec.dtype = n->output_type(0);
    spec.shape = n->output_shape(0);
    spec.allocator = device->allocator();
    (*by_key)[Rendezvous::CreateKey(peer, static_cast<uint64_t>(incarnation), device->name(),
                                    tensor_name)] = spec;
  }
  return absl::OkStatus();
}

RemoteRendezvous::RemoteRendezvous(Rendezvous* local, const TaskLinks* links,
                                   const RemoteRecvSpecs* expected, uint64_t step_tag,
                                   Scheduler schedule, uint64_t max_bytes)
    : local_(local),
      links_(links),
      expected_(expected),
      step_tag_(step_tag),
      schedule_(std::move(schedule)),
      max_bytes_(max_bytes) {}

RemoteRendezvous::~RemoteRendezvous() {
  InFlight* f = in_flight_.get();
  MutexLock l(&f->mu);
  f->mu.Await([f]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(f->mu) { return f->n == 0; });
}

absl::StatusOr<std::string> RemoteRendezvous::WireName(absl::string_view key) {
  std::vector<absl::string_view> parts = absl::StrSplit(key, absl::MaxSplits(';', 3));
  if (parts.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous key '", key, "' is malformed"));
  }
  return absl::StrCat(parts[0], ";", parts[2], ";", parts[3]);
}

absl::StatusOr<std::string> RemoteRendezvous::DestinationTask(absl::string_view key) {
  std::vector<absl::string_view> parts = absl::StrSplit(key, absl::MaxSplits(';', 3));
  if (parts.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous key '", key, "' is malformed"));
  }
  return TaskOfDevice(parts[2]);
}

absl::StatusOr<RemoteRendezvous::Route> RemoteRendezvous::RouteOf(const std::string& key) const {
  std::vector<absl::string_view> parts = absl::StrSplit(key, absl::MaxSplits(';', 3));
  if (parts.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous key '", key, "' is malformed"));
  }
  Route r;
  r.wire_name = absl::StrCat(parts[0], ";", parts[2], ";", parts[3]);
  STRATA_ASSIGN_OR_RETURN(r.src_task, TaskOfDevice(parts[0]));
  STRATA_ASSIGN_OR_RETURN(r.dst_task, TaskOfDevice(parts[2]));
  const std::string& me = links_->local_task();
  if (r.src_task == me && r.dst_task == me) return r;
  const std::string& other = r.src_task == me ? r.dst_task : r.src_task;
  if (r.src_task != me && r.dst_task != me) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous key '", key, "' is between ",
                                                   r.src_task, " and ", r.dst_task, ", not ", me));
  }
  r.peer = links_->RankOf(other);
  if (r.peer < 0) {
    return absl::InvalidArgumentError(absl::StrCat("rendezvous key '", key, "' names task ", other,
                                                   ", which is not in the cluster"));
  }
  return r;
}

uint64_t RemoteRendezvous::TagOf(const std::string& wire_name) const {
  // Even: the header; odd (tag + 1): the bytes.
  return StableHash64(wire_name, step_tag_) & ~uint64_t{1};
}

absl::Status RemoteRendezvous::Send(const std::string& key, const Tensor& value) {
  STRATA_ASSIGN_OR_RETURN(Route route, RouteOf(key));
  if (route.peer < 0) return local_->Send(key, value);
  auto header = std::make_shared<WireHeader>();
  header->name_hash = StableHash64(route.wire_name);
  Tensor held;
  if (!value.IsInitialized()) {
    header->flags = kDead;
  } else {
    const TensorShape& shape = value.shape();
    if (!DataTypeCanUseMemcpy(value.dtype()) || shape.dims() > kMaxDims) {
      return absl::UnimplementedError(absl::StrCat(
          "tensor ", route.wire_name, ": a ", DataTypeString(value.dtype()), " ",
          shape.DebugString(),
          " cannot cross tasks (only dtypes copied byte for byte, of rank <= ", kMaxDims, ")"));
    }
    header->dtype = static_cast<int32_t>(value.dtype());
    header->dims = shape.dims();
    for (int i = 0; i < shape.dims(); ++i) header->dim[i] = shape.dim_size(i);
    header->bytes = value.TotalBytes();
    held = value;
  }
  Transport* t = links_->transport();
  const uint64_t tag = TagOf(route.wire_name);
  // The callbacks keep the header and the tensor alive until the transport
  // is done with them (possibly after this step ended). A failed send is the
  // transport's abort, which every task sees already.
  t->SendAsync(route.peer, tag, header.get(), sizeof(WireHeader), [header](absl::Status) {});
  if (header->bytes > 0) {
    t->SendAsync(route.peer, tag + 1, held.raw_data(), header->bytes, [held](absl::Status) {});
  }
  return absl::OkStatus();
}

void RemoteRendezvous::RecvAsync(const std::string& key, DoneCallback done) {
  absl::StatusOr<Route> route = RouteOf(key);
  if (!route.ok()) {
    done(route.status(), Tensor());
    return;
  }
  if (route->peer < 0) {
    local_->RecvAsync(key, std::move(done));
    return;
  }
  auto spec_it = expected_->find(route->wire_name);
  if (spec_it == expected_->end()) {
    done(absl::InternalError(absl::StrCat("no _Recv of this step expects ", route->wire_name)),
         Tensor());
    return;
  }
  struct Pending {
    WireHeader header;
    RemoteRecvSpec spec;
    std::string what;  // for messages
    DoneCallback done;
    Scheduler schedule;
    std::shared_ptr<InFlight> in_flight;
    Tensor value;
  };
  // The receiver continues on the scheduler's thread, not the transport's.
  auto finish = [](std::shared_ptr<Pending> p, const absl::Status& s) {
    {
      MutexLock l(&p->in_flight->mu);
      p->in_flight->waiting.erase(p->what);
    }
    auto run = [p, s] {
      p->done(s.ok() ? s : AnnotateStatus(s, absl::StrCat(p->what, ": ")), p->value);
      p->value = Tensor();
    };
    if (p->schedule) {
      std::shared_ptr<InFlight> f = p->in_flight;
      {
        MutexLock l(&f->mu);
        ++f->n;
      }
      p->schedule(std::move(run));
      MutexLock l(&f->mu);
      --f->n;
    } else {
      run();
    }
  };
  auto p = std::make_shared<Pending>();
  p->spec = spec_it->second;
  p->what = absl::StrCat("receiving ", route->wire_name, " from ", route->src_task, " on ",
                         route->dst_task);
  p->done = std::move(done);
  p->schedule = schedule_;
  p->in_flight = in_flight_;
  {
    MutexLock l(&in_flight_->mu);
    in_flight_->waiting.insert(p->what);
  }
  Transport* t = links_->transport();
  const uint64_t tag = TagOf(route->wire_name);
  const uint64_t name_hash = StableHash64(route->wire_name);
  const int peer = route->peer;
  const uint64_t max_bytes = max_bytes_;
  t->RecvAsync(
      peer, tag, &p->header, sizeof(WireHeader),
      [p, t, peer, tag, name_hash, max_bytes, finish](absl::Status s) {
        if (!s.ok()) return finish(p, s);
        TensorShape shape;
        const std::string bad = CheckHeader(p->header, name_hash, p->spec, max_bytes, &shape);
        if (!bad.empty()) {
          absl::Status refused = absl::InvalidArgumentError(absl::StrCat("refused: ", bad));
          t->Abort(AnnotateStatus(refused, absl::StrCat(p->what, ": ")));
          return finish(p, refused);
        }
        if (p->header.flags & kDead) return finish(p, absl::OkStatus());
        absl::StatusOr<Tensor> v = Tensor::Allocate(p->spec.allocator, p->spec.dtype, shape);
        if (!v.ok()) {
          t->Abort(AnnotateStatus(v.status(), absl::StrCat(p->what, ": ")));
          return finish(p, v.status());
        }
        p->value = *std::move(v);
        if (p->header.bytes == 0) return finish(p, absl::OkStatus());
        t->RecvAsync(peer, tag + 1, p->value.raw_data(), p->header.bytes,
                     [p, finish](absl::Status s2) { finish(p, s2); });
      });
}

std::vector<std::string> RemoteRendezvous::WaitingReceives() const {
  MutexLock l(&in_flight_->mu);
  return std::vector<std::string>(in_flight_->waiting.begin(), in_flight_->waiting.end());
}

void RemoteRendezvous::StartAbort(const absl::Status& status) {
  local_->StartAbort(status);
  const absl::Status s = status.ok() ? absl::CancelledError("step aborted") : status;
  links_->transport()->Abort(AnnotateStatus(s, absl::StrCat("task ", links_->local_task(), ": ")));
}

}  // namespace strata
