// Byte-level copy helpers shared by the array kernels (Transpose, ConcatV2,
// Pack, Slice, Fill, OneHot). The array ops never do arithmetic on elements,
// so their kernels work on raw bytes and serve every dtype a Tensor can hold:
// one kernel per op instead of one per dtype.
//
//   ConcatRows(dev, {{a_ptr, a_row_bytes}, {b_ptr, b_row_bytes}}, rows, out_ptr);
//   FillPattern(dev, out_ptr, n, &value, sizeof(float));
//
// Internal to //kernels/cpu:array_kernels. Thread-safety: stateless; the
// helpers split work over the given Eigen device and write only `dst`.
// Ownership: pointers are borrowed for the call.
#ifndef STRATA_KERNELS_CPU_ARRAY_COPY_H_
#define STRATA_KERNELS_CPU_ARRAY_COPY_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/types/span.h"
#include "kernels/eigen_views.h"

namespace strata {
namespace array_copy {

// Cost of copying `bytes` bytes, for Eigen's parallelFor sharding.
inline Eigen::TensorOpCost CopyCost(int64_t bytes) {
  return Eigen::TensorOpCost(static_cast<double>(bytes), static_cast<double>(bytes), 0);
}

// One input of a row-wise concatenation: `rows` rows of `row_bytes` each.
struct RowSource {
  const char* data;
  int64_t row_bytes;
};

// dst row r = src_0 row r ++ src_1 row r ++ ... for r in [0, rows): ConcatV2
// (and Pack) with everything before the axis folded into `rows`.
inline void ConcatRows(const Eigen::ThreadPoolDevice& dev, absl::Span<const RowSource> srcs,
                       int64_t rows, char* dst) {
  int64_t out_row = 0;
  for (const RowSource& s : srcs) out_row += s.row_bytes;
  if (rows == 0 || out_row == 0) return;
  dev.parallelFor(rows, CopyCost(out_row), [&](Eigen::Index begin, Eigen::Index end) {
    for (Eigen::Index r = begin; r < end; ++r) {
      char* d = dst + r * out_row;
      for (const RowSource& s : srcs) {
        if (s.row_bytes == 0) continue;
        std::memcpy(d, s.data + r * s.row_bytes, s.row_bytes);
        d += s.row_bytes;
      }
    }
  });
}

// Writes `n` copies of the `elem_bytes`-byte value at `value` to `dst`.
inline void FillPattern(const Eigen::ThreadPoolDevice& dev, char* dst, int64_t n,
                        const void* value, size_t elem_bytes) {
  if (n == 0) return;
  auto fill = [&](auto tag) {
    using U = decltype(tag);
    U v;
    std::memcpy(&v, value, sizeof(U));
    U* d = reinterpret_cast<U*>(dst);
    dev.parallelFor(n, CopyCost(sizeof(U)), [d, v](Eigen::Index begin, Eigen::Index end) {
      std::fill(d + begin, d + end, v);
    });
  };
  switch (elem_bytes) {
    case 1: return fill(uint8_t{});
    case 2: return fill(uint16_t{});
    case 4: return fill(uint32_t{});
    default: return fill(uint64_t{});
  }
}

// A row-major walk over a multi-index in `dims` that keeps the matching
// offset in another layout (`strides`, in elements): the inner loop of
// Slice and Transpose. Start at flat index `start`; Next() steps by one.
class StridedWalker {
 public:
  StridedWalker(absl::Span<const int64_t> dims, absl::Span<const int64_t> strides, int64_t start,
                int64_t base_offset)
      : dims_(dims.begin(), dims.end()), strides_(strides.begin(), strides.end()),
        index_(dims.size(), 0), offset_(base_offset) {
    for (int i = static_cast<int>(dims_.size()) - 1; i >= 0 && start > 0; --i) {
      index_[i] = start % dims_[i];
      start /= dims_[i];
      offset_ += index_[i] * strides_[i];
    }
  }
  int64_t offset() const { return offset_; }
  void Next() {
    for (int i = static_cast<int>(dims_.size()) - 1; i >= 0; --i) {
      offset_ += strides_[i];
      if (++index_[i] < dims_[i]) return;
      offset_ -= strides_[i] * dims_[i];
      index_[i] = 0;
    }
  }

 private:
  std::vector<int64_t> dims_, strides_, index_;
  int64_t offset_;
};

// Row-major strides (in elements) of `dims`.
inline std::vector<int64_t> RowMajorStrides(absl::Span<const int64_t> dims) {
  std::vector<int64_t> s(dims.size());
  int64_t acc = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

}  // namespace array_copy
}  // namespace strata

#endif  // STRATA_KERNELS_CPU_ARRAY_COPY_H_
