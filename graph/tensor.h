// Tensor: a dtype, a shape and a reference-counted, aligned buffer from an
// Allocator. Copies share the buffer (cheap); kernels that write a fresh
// result allocate a new tensor. Eigen views live in kernels/eigen_views.h so
// that graph code does not pay for Eigen's headers.
//
//   Tensor t(DT_FLOAT, TensorShape{2, 3});          // host memory
//   float* p = t.data<float>();
//   Tensor s = Tensor::Scalar<float>(1.5f);
//   Tensor v = Tensor::FromVector<int32_t>({1, 2, 3});
//   absl::StatusOr<Tensor> big = Tensor::Allocate(alloc, DT_FLOAT, shape);  // ResourceExhausted if none
//
// Thread-safety: a Tensor object is a value; distinct copies may be used from
// different threads (the reference count is atomic). Writing a buffer while
// another thread reads it is the caller's race to avoid.
#ifndef STRATA_GRAPH_TENSOR_H_
#define STRATA_GRAPH_TENSOR_H_

#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/allocator.h"
#include "graph/tensor_shape.h"
#include "graph/types.h"
#include "proto/tensor.pb.h"

namespace strata {

// A reference-counted block of memory owned by an Allocator.
class TensorBuffer {
 public:
  // Takes ownership of `data` (from `alloc->AllocateRaw(..., bytes)`).
  TensorBuffer(Allocator* alloc, void* data, size_t bytes)
      : alloc_(alloc), data_(data), bytes_(bytes) {}
  TensorBuffer(const TensorBuffer&) = delete;
  TensorBuffer& operator=(const TensorBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  Allocator* allocator() const { return alloc_; }
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
  // True if this is the only reference (the buffer may be reused in place).
  bool RefCountIsOne() const { return refs_.load(std::memory_order_acquire) == 1; }

 private:
  ~TensorBuffer() { alloc_->DeallocateRaw(data_, bytes_); }
  std::atomic<int> refs_{1};
  Allocator* const alloc_;
  void* const data_;
  const size_t bytes_;
};

class Tensor {
 public:
  Tensor() = default;  // uninitialized: DT_INVALID, no buffer
  // Allocates from the host allocator; aborts if host memory is exhausted.
  Tensor(DataType dtype, const TensorShape& shape);
  // Allocates from `alloc`; aborts if it returns nothing (use Allocate to get
  // a ResourceExhausted Status instead).
  Tensor(Allocator* alloc, DataType dtype, const TensorShape& shape);
  ~Tensor() {
    if (buf_ != nullptr) buf_->Unref();
  }
  Tensor(const Tensor& o) : dtype_(o.dtype_), shape_(o.shape_), buf_(o.buf_) {
    if (buf_ != nullptr) buf_->Ref();
  }
  Tensor(Tensor&& o) noexcept : dtype_(o.dtype_), shape_(std::move(o.shape_)), buf_(o.buf_) {
    o.buf_ = nullptr;
    o.dtype_ = DT_INVALID;
  }
  Tensor& operator=(const Tensor& o) {
    Tensor tmp(o);
    Swap(tmp);
    return *this;
  }
  Tensor& operator=(Tensor&& o) noexcept {
    Tensor tmp(std::move(o));
    Swap(tmp);
    return *this;
  }
  void Swap(Tensor& o) noexcept {
    std::swap(dtype_, o.dtype_);
    std::swap(shape_, o.shape_);
    std::swap(buf_, o.buf_);
  }

  // ResourceExhausted naming the dtype and shape if `alloc` has no room;
  // InvalidArgument for a dtype a tensor cannot hold.
  static absl::StatusOr<Tensor> Allocate(Allocator* alloc, DataType dtype,
                                         const TensorShape& shape);

  template <typename T>
  static Tensor Scalar(T v) {
    Tensor t(DataTypeToEnum<T>::value, TensorShape());
    *t.data<T>() = v;
    return t;
  }
  // A rank-1 tensor of the values, or of shape `shape` if given (sizes must match).
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values);
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, const TensorShape& shape);

  bool IsInitialized() const { return dtype_ != DT_INVALID; }
  DataType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  int dims() const { return shape_.dims(); }
  int64_t dim_size(int d) const { return shape_.dim_size(d); }
  int64_t NumElements() const { return shape_.num_elements(); }
  size_t TotalBytes() const { return NumElements() * DataTypeSize(dtype_); }

  void* raw_data() const { return buf_ == nullptr ? nullptr : buf_->data(); }
  template <typename T>
  T* data() const {
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  absl::Span<T> span() const {
    return absl::Span<T>(data<T>(), static_cast<size_t>(NumElements()));
  }
  TensorBuffer* buffer() const { return buf_; }
  Allocator* allocator() const { return buf_ == nullptr ? nullptr : buf_->allocator(); }
  bool SharesBufferWith(const Tensor& o) const { return buf_ != nullptr && buf_ == o.buf_; }
  // True if no other Tensor shares this buffer (it may be written in place).
  bool RefCountIsOne() const { return buf_ != nullptr && buf_->RefCountIsOne(); }

  // The same buffer seen with another shape of the same element count.
  absl::StatusOr<Tensor> Reshaped(const TensorShape& shape) const;
  // A deep copy into fresh host memory.
  Tensor DeepCopy() const;

  // Parses a TensorProto (tensor_content or typed values, TensorFlow's rules);
  // InvalidArgument for bad shapes, sizes or unsupported dtypes.
  static absl::StatusOr<Tensor> FromProto(const ::tensorflow::TensorProto& p,
                                          Allocator* alloc = CpuAllocator());
  // Writes tensor_content (compact) or, with `typed_values`, the typed field.
  // A DT_RESOURCE tensor gets only its dtype and shape (no handle ids).
  void AsProto(::tensorflow::TensorProto* p, bool typed_values = false) const;
  // AsProto, or InvalidArgument for a DT_RESOURCE tensor: resource handles
  // name state of this process and are never serialized.
  absl::Status ToProto(::tensorflow::TensorProto* p, bool typed_values = false) const;

  // "float [2,3] 1 2 3 4 5 6" with at most `max_entries` values.
  std::string DebugString(int max_entries = 10) const;

 private:
  DataType dtype_ = DT_INVALID;
  TensorShape shape_;
  TensorBuffer* buf_ = nullptr;
};

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values) {
  return FromVector(values, TensorShape{static_cast<int64_t>(values.size())});
}

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values, const TensorShape& shape) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  if (static_cast<int64_t>(values.size()) != shape.num_elements()) std::abort();
  for (size_t i = 0; i < values.size(); ++i) t.data<T>()[i] = values[i];
  return t;
}

}  // namespace strata

#endif  // STRATA_GRAPH_TENSOR_H_
