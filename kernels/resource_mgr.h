// Resources: per-device state that outlives steps, such as variables. Each
// device owns one ResourceMgr (DeviceBase::resource_manager()); kernels find
// resources in it by handle.
//
// Handle representation. A DT_RESOURCE tensor is a scalar whose one 8-byte
// element is a uint64 resource id. Ids come from one process-wide counter
// (starting at 1, never reused), and each ResourceMgr knows only the ids it
// issued, so a handle is meaningful only on the device whose VarHandleOp made
// it: a handle used on another device, after DestroyResourceOp, or forged
// from arbitrary bits looks up as NotFound, never as some other resource.
// Handles are never serialized (Tensor::ToProto and TensorProto parsing
// reject DT_RESOURCE).
//
//   ResourceMgr* rm = ctx.device()->resource_manager();
//   uint64_t id;
//   STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> v, rm->LookupOrCreate<Var>(
//       "", "w", [&] { return std::make_shared<Var>("w", DT_FLOAT, shape); }, &id));
//   STRATA_ASSIGN_OR_RETURN(Tensor handle, MakeResourceHandle(ctx.allocator(), id));
//   ...
//   STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Var> same, LookupResource<Var>(ctx, 0));
//
// A Var holds a variable's value under a mutex. Its buffer is copy-on-write:
// readers take a reference to the current buffer (ReadVariableOp outputs
// share it), and every writer that updates in place first calls
// PrepareForUpdate, which copies the buffer if anybody else still holds it.
// So a tensor a reader got is never changed by later writes, and the common
// training step (nobody holds the old value) updates in place.
//
// Thread-safety: ResourceMgr methods may be called concurrently. A Var's
// value is guarded by its mu(); see the Var methods for which lock each needs.
// Ownership: the ResourceMgr keeps each resource alive (shared_ptr) until it
// is deleted or the manager is destroyed; kernels hold a shared_ptr only for
// the duration of one Compute.
#ifndef STRATA_KERNELS_RESOURCE_MGR_H_
#define STRATA_KERNELS_RESOURCE_MGR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "graph/allocator.h"
#include "graph/tensor.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"

namespace strata {

class OpKernelContext;

class ResourceBase {
 public:
  virtual ~ResourceBase() = default;
  // "variable 'w' float [3,2]": for error messages and listings.
  virtual std::string DebugString() const = 0;
};

// A resource variable: a dtype, the shape its VarHandleOp declared (possibly
// partial) and, once assigned, a value.
class Var : public ResourceBase {
 public:
  Var(std::string name, DataType dtype, PartialTensorShape declared_shape)
      : name_(std::move(name)), dtype_(dtype), declared_shape_(std::move(declared_shape)) {}

  const std::string& name() const { return name_; }
  DataType dtype() const { return dtype_; }
  const PartialTensorShape& declared_shape() const { return declared_shape_; }
  std::string DebugString() const override;

  Mutex* mu() const ABSL_LOCK_RETURNED(mu_) { return &mu_; }

  // The current value (uninitialized Tensor before the first assignment).
  // Copying it out under a reader lock gives a snapshot later writes never
  // touch.
  const Tensor& value() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return value_; }
  bool is_initialized() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return value_.IsInitialized(); }

  // FailedPrecondition naming the variable if it was never assigned.
  absl::Status CheckInitialized() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // InvalidArgument naming the variable and `op` if `dtype` is not its dtype.
  absl::Status CheckDtype(DataType dtype, const char* op) const;
  // InvalidArgument naming the variable if `value` does not fit: wrong dtype,
  // a shape the declared shape rules out, or (with `require_current_shape`
  // and a value present) a shape other than the current value's.
  absl::Status CheckAssignable(const Tensor& value, bool require_current_shape) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // Replaces the value. The buffer is shared with `v`, not copied; in-place
  // writers call PrepareForUpdate first, so sharing is safe.
  void set_value(Tensor v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { value_ = std::move(v); }
  // Makes the value's buffer the variable's alone, so the caller may write it
  // in place: a no-op when nobody else holds it (the usual training step),
  // else a copy into fresh memory from `alloc`. FailedPrecondition if
  // uninitialized; ResourceExhausted if the copy cannot be allocated.
  absl::Status PrepareForUpdate(Allocator* alloc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The value for an in-place write; call PrepareForUpdate first.
  Tensor* mutable_value() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return &value_; }

 private:
  const std::string name_;
  const DataType dtype_;
  const PartialTensorShape declared_shape_;
  mutable Mutex mu_;
  Tensor value_ ABSL_GUARDED_BY(mu_);
};

class ResourceMgr {
 public:
  // `device_name` appears in error messages.
  explicit ResourceMgr(std::string device_name) : device_name_(std::move(device_name)) {}
  ResourceMgr(const ResourceMgr&) = delete;
  ResourceMgr& operator=(const ResourceMgr&) = delete;

  const std::string& device_name() const { return device_name_; }

  struct Entry {
    std::string container;
    std::string name;
    uint64_t id;
    std::shared_ptr<ResourceBase> resource;
  };

  // The resource named (container, name), made by `create` if there is none
  // (`create` runs under the manager's lock, so two racing callers get one
  // resource). Its id goes to `*id`. InvalidArgument if the name holds a
  // resource of another type; `create`'s error if it fails.
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> LookupOrCreate(
      const std::string& container, const std::string& name,
      const std::function<absl::StatusOr<std::shared_ptr<T>>()>& create, uint64_t* id);

  // The resource with this id. NotFound naming the id and the device if this
  // manager has none (destroyed, or issued by another device's manager);
  // InvalidArgument if it is not a T.
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> Lookup(uint64_t id) const;
  absl::StatusOr<std::shared_ptr<ResourceBase>> LookupBase(uint64_t id) const;

  // Forgets the resource (kernels still using it finish with it). NotFound
  // as for Lookup.
  absl::Status Delete(uint64_t id);
  // Forgets every resource of `container`; returns how many there were.
  int Cleanup(const std::string& container);

  // Every resource, ordered by (container, name).
  std::vector<Entry> List() const;
  size_t size() const;

 private:
  absl::StatusOr<std::shared_ptr<ResourceBase>> LookupOrCreateBase(
      const std::string& container, const std::string& name,
      const std::function<absl::StatusOr<std::shared_ptr<ResourceBase>>()>& create,
      const std::function<bool(const ResourceBase&)>& is_type, uint64_t* id);
  absl::Status WrongType(const ResourceBase& r, uint64_t id) const;

  const std::string device_name_;
  mutable Mutex mu_;
  // (container, name) -> id; id -> entry.
  absl::flat_hash_map<std::pair<std::string, std::string>, uint64_t> ids_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Entry> by_id_ ABSL_GUARDED_BY(mu_);
};

// A scalar DT_RESOURCE tensor holding `id`, from `alloc`.
absl::StatusOr<Tensor> MakeResourceHandle(Allocator* alloc, uint64_t id);
// The id in a handle tensor; InvalidArgument unless `t` is a DT_RESOURCE
// scalar.
absl::StatusOr<uint64_t> ResourceIdFromHandle(const Tensor& t);

// The resource behind the handle in the kernel's input `input`, looked up in
// the kernel's device: FailedPrecondition if the device has no ResourceMgr,
// else ResourceIdFromHandle's and Lookup's errors.
absl::StatusOr<std::shared_ptr<ResourceBase>> LookupResourceBase(OpKernelContext& ctx, int input);
template <typename T>
absl::StatusOr<std::shared_ptr<T>> LookupResource(OpKernelContext& ctx, int input);

// ---- Template definitions ----

template <typename T>
absl::StatusOr<std::shared_ptr<T>> ResourceMgr::LookupOrCreate(
    const std::string& container, const std::string& name,
    const std::function<absl::StatusOr<std::shared_ptr<T>>()>& create, uint64_t* id) {
  auto r = LookupOrCreateBase(
      container, name,
      [&]() -> absl::StatusOr<std::shared_ptr<ResourceBase>> {
        auto made = create();
        if (!made.ok()) return made.status();
        return std::shared_ptr<ResourceBase>(*std::move(made));
      },
      [](const ResourceBase& b) { return dynamic_cast<const T*>(&b) != nullptr; }, id);
  if (!r.ok()) return r.status();
  return std::static_pointer_cast<T>(*std::move(r));
}

template <typename T>
absl::StatusOr<std::shared_ptr<T>> ResourceMgr::Lookup(uint64_t id) const {
  auto r = LookupBase(id);
  if (!r.ok()) return r.status();
  std::shared_ptr<T> t = std::dynamic_pointer_cast<T>(*r);
  if (t == nullptr) return WrongType(**r, id);
  return t;
}

template <typename T>
absl::StatusOr<std::shared_ptr<T>> LookupResource(OpKernelContext& ctx, int input) {
  auto r = LookupResourceBase(ctx, input);
  if (!r.ok()) return r.status();
  std::shared_ptr<T> t = std::dynamic_pointer_cast<T>(*r);
  if (t == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", input, " is a handle to ", (*r)->DebugString(),
                     ", not the kind of resource this op uses"));
  }
  return t;
}

}  // namespace strata

#endif  // STRATA_KERNELS_RESOURCE_MGR_H_
