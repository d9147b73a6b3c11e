#include "kernels/resource_mgr.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <tuple>

#include "base/status.h"
#include "kernels/op_kernel.h"

namespace strata {

namespace {

// One counter for the whole process: an id names at most one resource ever,
// so a stale or foreign handle can only miss, never alias.
uint64_t NewResourceId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

std::string Var::DebugString() const {
  return absl::StrCat("variable '", name_, "' ", DataTypeString(dtype_), " ",
                      declared_shape_.DebugString());
}

absl::Status Var::CheckInitialized() const {
  if (value_.IsInitialized()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "variable '", name_, "' is uninitialized: run its initializer (an assignment) first"));
}

absl::Status Var::CheckDtype(DataType dtype, const char* op) const {
  if (dtype == dtype_) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, " with dtype ", DataTypeString(dtype),
                                                 " on ", DebugString()));
}

absl::Status Var::CheckAssignable(const Tensor& value, bool require_current_shape) const {
  if (value.dtype() != dtype_) {
    return absl::InvalidArgumentError(absl::StrCat("cannot assign a ", DataTypeString(value.dtype()),
                                                   " value to ", DebugString()));
  }
  if (!declared_shape_.IsCompatibleWith(PartialTensorShape(value.shape()))) {
    return absl::InvalidArgumentError(absl::StrCat("cannot assign a value of shape ",
                                                   value.shape().DebugString(), " to ",
                                                   DebugString()));
  }
  if (require_current_shape && value_.IsInitialized() && value_.shape() != value.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot apply a value of shape ", value.shape().DebugString(), " to ", DebugString(),
        " whose value has shape ", value_.shape().DebugString()));
  }
  return absl::OkStatus();
}

absl::Status Var::PrepareForUpdate(Allocator* alloc) {
  STRATA_RETURN_IF_ERROR(CheckInitialized());
  if (value_.RefCountIsOne()) return absl::OkStatus();
  // Someone (a ReadVariableOp output, the producer of an assigned value)
  // still holds the buffer: give the variable its own copy and leave theirs
  // as it was.
  auto copy = Tensor::Allocate(alloc, dtype_, value_.shape());
  if (!copy.ok()) return AnnotateStatus(copy.status(), absl::StrCat(DebugString(), ": "));
  if (value_.TotalBytes() > 0) std::memcpy(copy->raw_data(), value_.raw_data(), value_.TotalBytes());
  value_ = *std::move(copy);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ResourceBase>> ResourceMgr::LookupOrCreateBase(
    const std::string& container, const std::string& name,
    const std::function<absl::StatusOr<std::shared_ptr<ResourceBase>>()>& create,
    const std::function<bool(const ResourceBase&)>& is_type, uint64_t* id) {
  MutexLock l(&mu_);
  auto key = std::make_pair(container, name);
  auto it = ids_.find(key);
  if (it != ids_.end()) {
    const Entry& e = by_id_.at(it->second);
    if (!is_type(*e.resource)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "resource '", name, "' in container '", container, "' on ", device_name_, " is ",
          e.resource->DebugString(), ", not the kind asked for"));
    }
    *id = e.id;
    return e.resource;
  }
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<ResourceBase> r, create());
  const uint64_t new_id = NewResourceId();
  ids_.emplace(key, new_id);
  by_id_.emplace(new_id, Entry{container, name, new_id, r});
  *id = new_id;
  return r;
}

absl::StatusOr<std::shared_ptr<ResourceBase>> ResourceMgr::LookupBase(uint64_t id) const {
  ReaderMutexLock l(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "resource #", id, " is not on ", device_name_,
        " (it was destroyed, or it lives on another device: run the op on the device of the "
        "VarHandleOp that made the handle)"));
  }
  return it->second.resource;
}

absl::Status ResourceMgr::WrongType(const ResourceBase& r, uint64_t id) const {
  return absl::InvalidArgumentError(
      absl::StrCat("resource #", id, " on ", device_name_, " is ", r.DebugString(),
                   ", not the kind asked for"));
}

absl::Status ResourceMgr::Delete(uint64_t id) {
  MutexLock l(&mu_);
  auto it = by_id_.find(id);
  if (it == by_id_.end()) {
    return absl::NotFoundError(
        absl::StrCat("resource #", id, " is not on ", device_name_, "; cannot delete it"));
  }
  ids_.erase(std::make_pair(it->second.container, it->second.name));
  by_id_.erase(it);
  return absl::OkStatus();
}

int ResourceMgr::Cleanup(const std::string& container) {
  MutexLock l(&mu_);
  int n = 0;
  for (auto it = by_id_.begin(); it != by_id_.end();) {
    if (it->second.container == container) {
      ids_.erase(std::make_pair(it->second.container, it->second.name));
      by_id_.erase(it++);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

std::vector<ResourceMgr::Entry> ResourceMgr::List() const {
  std::vector<Entry> out;
  {
    ReaderMutexLock l(&mu_);
    for (const auto& kv : by_id_) out.push_back(kv.second);
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.container, a.name) < std::tie(b.container, b.name);
  });
  return out;
}

size_t ResourceMgr::size() const {
  ReaderMutexLock l(&mu_);
  return by_id_.size();
}

absl::StatusOr<Tensor> MakeResourceHandle(Allocator* alloc, uint64_t id) {
  STRATA_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(alloc, DT_RESOURCE, TensorShape()));
  *t.data<uint64_t>() = id;
  return t;
}

absl::StatusOr<uint64_t> ResourceIdFromHandle(const Tensor& t) {
  if (t.dtype() != DT_RESOURCE || t.dims() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a scalar resource handle, got ",
                     t.IsInitialized() ? absl::StrCat(DataTypeString(t.dtype()), " ",
                                                      t.shape().DebugString())
                                       : std::string("an uninitialized tensor")));
  }
  return *t.data<uint64_t>();
}

absl::StatusOr<std::shared_ptr<ResourceBase>> LookupResourceBase(OpKernelContext& ctx, int input) {
  ResourceMgr* rm = ctx.device()->resource_manager();
  if (rm == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", ctx.device()->name(), " has no resource manager"));
  }
  auto id = ResourceIdFromHandle(ctx.input(input));
  if (!id.ok()) return AnnotateStatus(id.status(), absl::StrCat("input ", input, ": "));
  return rm->LookupBase(*id);
}

}  // namespace strata
