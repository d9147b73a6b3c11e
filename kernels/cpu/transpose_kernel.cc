// Transpose on CPU, for every dtype (by element size). Steps:
//  1. Simplify: drop dims of size 1 and merge input dims that stay adjacent
//     and in order under the permutation ([N,H,W,C] with perm [0,3,1,2] is a
//     batch of [H*W, C] -> [C, H*W] transposes). A permutation that becomes
//     the identity moves nothing: the output shares the input's buffer.
//  2. If the innermost input dim stays innermost, the output is made of
//     contiguous runs of the input: memcpy each run.
//  3. Otherwise, the output's inner dim reads the input with a stride; copy
//     in square tiles so that both the reads and the writes stay in cache.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "kernels/cpu/array_copy.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

using array_copy::RowMajorStrides;
using array_copy::StridedWalker;

// Tile edge for the strided case: a 32 x 32 tile of 8-byte elements is
// 8 KiB, which stays in L1 while it is transposed.
constexpr int64_t kTile = 32;

// Step 1. On return `dims` are the merged input dims and `perm` the merged
// permutation (output dim k is input dim perm[k]).
void Simplify(absl::Span<const int64_t> in_dims, absl::Span<const int> in_perm,
              std::vector<int64_t>* dims, std::vector<int>* perm) {
  const int rank = static_cast<int>(in_dims.size());
  // Drop size-1 dims.
  std::vector<int> new_axis(rank, -1);
  std::vector<int64_t> kept;
  for (int a = 0; a < rank; ++a) {
    if (in_dims[a] == 1) continue;
    new_axis[a] = static_cast<int>(kept.size());
    kept.push_back(in_dims[a]);
  }
  std::vector<int> q;
  for (int k = 0; k < rank; ++k) {
    if (new_axis[in_perm[k]] >= 0) q.push_back(new_axis[in_perm[k]]);
  }
  // Group output dims whose input axes run consecutively.
  struct Group {
    int start, len;
  };
  std::vector<Group> groups;
  for (int a : q) {
    if (!groups.empty() && a == groups.back().start + groups.back().len) {
      ++groups.back().len;
    } else {
      groups.push_back({a, 1});
    }
  }
  // The merged input dims are the groups in input order.
  std::vector<int> by_start(groups.size());
  std::iota(by_start.begin(), by_start.end(), 0);
  std::sort(by_start.begin(), by_start.end(),
            [&](int x, int y) { return groups[x].start < groups[y].start; });
  std::vector<int> merged_index(groups.size());
  dims->assign(groups.size(), 1);
  for (size_t i = 0; i < by_start.size(); ++i) {
    const Group& g = groups[by_start[i]];
    merged_index[by_start[i]] = static_cast<int>(i);
    for (int a = g.start; a < g.start + g.len; ++a) (*dims)[i] *= kept[a];
  }
  perm->resize(groups.size());
  for (size_t k = 0; k < groups.size(); ++k) (*perm)[k] = merged_index[k];
}

// Step 2: output runs of `run` elements; run r's input offset follows the
// outer output dims.
void CopyRuns(const Eigen::ThreadPoolDevice& dev, const char* src, char* dst, int64_t elem,
              const std::vector<int64_t>& dims, const std::vector<int>& perm) {
  const int outer = static_cast<int>(perm.size()) - 1;
  const std::vector<int64_t> in_strides = RowMajorStrides(dims);
  std::vector<int64_t> out_dims(outer), strides(outer);
  int64_t runs = 1;
  for (int k = 0; k < outer; ++k) {
    out_dims[k] = dims[perm[k]];
    strides[k] = in_strides[perm[k]];
    runs *= out_dims[k];
  }
  const int64_t run_bytes = dims.back() * elem;
  dev.parallelFor(runs, array_copy::CopyCost(run_bytes), [&](Eigen::Index first, Eigen::Index last) {
    StridedWalker w(out_dims, strides, first, 0);
    for (Eigen::Index r = first; r < last; ++r, w.Next()) {
      std::memcpy(dst + r * run_bytes, src + w.offset() * elem, run_bytes);
    }
  });
}

// Step 3, for elements of type U (an unsigned integer of the element's size).
// Output dim `a` (the last) reads the input with stride sa; output dim `b`
// (where the input's last dim went) reads it with stride 1. Each work unit is
// one kTile-row strip of the [b, a] plane of one combination of the other dims.
template <typename U>
void CopyTiled(const Eigen::ThreadPoolDevice& dev, const U* src, U* dst,
               const std::vector<int64_t>& dims, const std::vector<int>& perm) {
  const int rank = static_cast<int>(perm.size());
  const std::vector<int64_t> in_strides = RowMajorStrides(dims);
  std::vector<int64_t> out_dims(rank);
  for (int k = 0; k < rank; ++k) out_dims[k] = dims[perm[k]];
  const std::vector<int64_t> out_strides = RowMajorStrides(out_dims);
  const int a = rank - 1;
  const int b = static_cast<int>(std::find(perm.begin(), perm.end(), rank - 1) - perm.begin());
  const int64_t cols = out_dims[a], rows = out_dims[b];
  const int64_t sa = in_strides[perm[a]], ob = out_strides[b];
  // The other output dims, walked by (input offset, output offset).
  std::vector<int64_t> odims, istr, ostr;
  for (int k = 0; k < rank; ++k) {
    if (k == a || k == b) continue;
    odims.push_back(out_dims[k]);
    istr.push_back(in_strides[perm[k]]);
    ostr.push_back(out_strides[k]);
  }
  int64_t outer = 1;
  for (int64_t d : odims) outer *= d;
  const int64_t strips = (rows + kTile - 1) / kTile;
  dev.parallelFor(
      outer * strips, array_copy::CopyCost(kTile * cols * int64_t(sizeof(U))),
      [&](Eigen::Index first, Eigen::Index last) {
        for (Eigen::Index unit = first; unit < last; ++unit) {
          const int64_t o = unit / strips, strip = unit % strips;
          const StridedWalker in_w(odims, istr, o, 0), out_w(odims, ostr, o, 0);
          const U* in = src + in_w.offset();
          U* out = dst + out_w.offset();
          const int64_t i0 = strip * kTile, ni = std::min(rows - i0, kTile);
          U tile[kTile][kTile];
          for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
            const int64_t nj = std::min(cols - j0, kTile);
            // Read the tile's input rows whole, then write its output rows
            // whole: each cache line is touched once, even when the input
            // stride is a large power of two (which would make the lines of
            // a strided walk evict each other).
            for (int64_t j = 0; j < nj; ++j) {
              std::memcpy(tile[j], in + i0 + (j0 + j) * sa, ni * sizeof(U));
            }
            for (int64_t i = 0; i < ni; ++i) {
              U* d = out + (i0 + i) * ob + j0;
              for (int64_t j = 0; j < nj; ++j) d[j] = tile[j][i];
            }
          }
        }
      });
}

class TransposeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Tensor& perm_t = ctx.input(1);
    if (perm_t.dims() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("Transpose perm must be 1-D, got shape ",
                                                     perm_t.shape().DebugString()));
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> perm_v, IntTensorValues(perm_t, "perm"));
    STRATA_ASSIGN_OR_RETURN(PartialTensorShape out_p, TransposeOutputShape(in.shape(), perm_v));
    STRATA_ASSIGN_OR_RETURN(TensorShape out_shape, out_p.AsTensorShape());
    STRATA_ASSIGN_OR_RETURN(std::vector<int> perm, NormalizePermutation(perm_v, in.dims()));

    std::vector<int64_t> dims;
    std::vector<int> p;
    Simplify(in.shape().dim_sizes(), perm, &dims, &p);
    bool identity = true;
    for (size_t k = 0; k < p.size(); ++k) identity = identity && p[k] == static_cast<int>(k);
    if (identity || in.NumElements() == 0) {
      // Nothing moves (or there is nothing): the same buffer, new shape.
      STRATA_ASSIGN_OR_RETURN(Tensor t, in.Reshaped(out_shape));
      ctx.set_output(0, std::move(t));
      return absl::OkStatus();
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, out_shape, &out));
    const auto& dev = ctx.eigen_cpu_device();
    const size_t elem = DataTypeSize(in.dtype());
    if (p.back() == static_cast<int>(p.size()) - 1) {
      CopyRuns(dev, static_cast<const char*>(in.raw_data()), static_cast<char*>(out->raw_data()),
               static_cast<int64_t>(elem), dims, p);
      return absl::OkStatus();
    }
    switch (elem) {
      case 1: CopyTiled(dev, in.data<uint8_t>(), out->data<uint8_t>(), dims, p); break;
      case 2: CopyTiled(dev, in.data<uint16_t>(), out->data<uint16_t>(), dims, p); break;
      case 4: CopyTiled(dev, in.data<uint32_t>(), out->data<uint32_t>(), dims, p); break;
      case 8: CopyTiled(dev, in.data<uint64_t>(), out->data<uint64_t>(), dims, p); break;
      default:
        return absl::InternalError(absl::StrCat("Transpose: no copy for ", elem, "-byte elements"));
    }
    return absl::OkStatus();
  }
};

STRATA_REGISTER_KERNEL(KernelBuilder("Transpose").Device(kDeviceCpu), TransposeOp);

}  // namespace
}  // namespace strata
