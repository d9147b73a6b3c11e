// CPU kernels of RandomUniform, RandomStandardNormal, TruncatedNormal,
// StatelessRandomUniform and _RandomRange (a range of the others' first
// draw; graph/ops/random_ops.h) for float, double, half and bfloat16.
//
// Reproducibility: element i's value is a pure function of (seed, seed2, run,
// i), where `run` counts the kernel instance's Compute calls. Each run gets a
// Philox key derived from (seed, seed2, run) by one Philox call, and element
// values come from Philox blocks whose counter names the block (or, for
// TruncatedNormal, the element and the attempt). Work is split over the
// intra-op pool by block, so the thread count changes nothing.
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "graph/ops/array_ops.h"
#include "kernels/cpu/philox.h"
#include "kernels/eigen_views.h"
#include "kernels/kernel_registry.h"
#include "kernels/op_kernel.h"

namespace strata {
namespace {

uint32_t Lo(uint64_t x) { return static_cast<uint32_t>(x); }
uint32_t Hi(uint64_t x) { return static_cast<uint32_t>(x >> 32); }

enum class Dist { kUniform, kNormal, kTruncatedNormal };

// Per output type: the type values are computed in, and how one Philox
// block becomes kPerBlock uniform values or kPerBlock / 2 pairs of normals.
template <typename T>
struct Gen {
  // float, half and bfloat16: four 32-bit words -> four values. Half and
  // bfloat16 uniforms keep only as many bits as their mantissa (10 and 7),
  // so that rounding to the narrow type can never produce 1.0.
  using C = float;
  static constexpr int kPerBlock = 4;
  static constexpr int kUniformBits = std::is_same<T, float>::value           ? 23
                                      : std::is_same<T, Eigen::half>::value ? 10
                                                                            : 7;
  static void Uniform(const PhiloxBlock& b, C* out) {
    constexpr float kScale = 1.0f / static_cast<float>(1u << kUniformBits);
    for (int k = 0; k < 4; ++k) out[k] = static_cast<float>(b[k] >> (32 - kUniformBits)) * kScale;
  }
  // Box-Muller pair p of a block: normals 2p and 2p+1.
  static void NormalPair(const PhiloxBlock& b, int p, C* out) {
    BoxMuller(Uint32ToUniformFloat(b[2 * p]), Uint32ToUniformFloat(b[2 * p + 1]), &out[0],
              &out[1]);
  }
};

// double: two 64-bit draws per block -> two values.
template <>
struct Gen<double> {
  using C = double;
  static constexpr int kPerBlock = 2;
  static void Uniform(const PhiloxBlock& b, C* out) {
    out[0] = Uint64ToUniformDouble(b[0], b[1]);
    out[1] = Uint64ToUniformDouble(b[2], b[3]);
  }
  static void NormalPair(const PhiloxBlock& b, int, C* out) {
    double u[2];
    Uniform(b, u);
    BoxMuller(u[0], u[1], &out[0], &out[1]);
  }
};

// Counter word 3 keeps the two counter layouts apart: blocks of values (0)
// and (element, attempt) pairs of TruncatedNormal (1).
PhiloxBlock BlockCounter(uint64_t block) { return {Lo(block), Hi(block), 0, 0}; }
PhiloxBlock AttemptCounter(uint64_t element, uint32_t attempt) {
  return {Lo(element), Hi(element), attempt, 1};
}

// TruncatedNormal redraws a value beyond two stddevs (probability 4.55%);
// each attempt offers kPerBlock candidates, so needing more than this many
// attempts has probability below 1e-600.
constexpr uint32_t kMaxAttempts = 512;

// Elements [offset, offset + n) of the run's values into out[0, n).
template <typename T, Dist D>
absl::Status Generate(const Eigen::ThreadPoolDevice& dev, PhiloxKey key, T* out, int64_t n,
                      int64_t offset = 0) {
  using G = Gen<T>;
  using C = typename G::C;
  constexpr int K = G::kPerBlock;
  // Rough cycles per block (Philox ~60; log/sqrt/sin/cos ~150 per pair).
  constexpr double kCycles = D == Dist::kUniform ? 80 : 80 + 150 * K / 2;
  if constexpr (D != Dist::kTruncatedNormal) {
    const int64_t first_block = offset / K, end = offset + n;
    const int64_t blocks = (end + K - 1) / K - first_block;
    dev.parallelFor(blocks, Eigen::TensorOpCost(0, K * sizeof(T), kCycles),
                    [&](Eigen::Index first, Eigen::Index last) {
                      C v[K];
                      for (Eigen::Index j = first; j < last; ++j) {
                        const int64_t b = first_block + j;
                        const PhiloxBlock bits = Philox4x32(BlockCounter(b), key);
                        if constexpr (D == Dist::kUniform) {
                          G::Uniform(bits, v);
                        } else {
                          for (int p = 0; p < K / 2; ++p) G::NormalPair(bits, p, v + 2 * p);
                        }
                        for (int k = 0; k < K; ++k) {
                          const int64_t i = b * K + k;
                          if (i >= offset && i < end) out[i - offset] = static_cast<T>(v[k]);
                        }
                      }
                    });
    return absl::OkStatus();
  }
  std::atomic<bool> exhausted{false};
  dev.parallelFor(n, Eigen::TensorOpCost(0, sizeof(T), kCycles),
                  [&](Eigen::Index first, Eigen::Index last) {
                    C v[2];
                    for (Eigen::Index i = first; i < last; ++i) {
                      bool done = false;
                      for (uint32_t a = 0; a < kMaxAttempts && !done; ++a) {
                        // Pairs are made only as needed: the first one
                        // serves 99.8% of the elements.
                        const PhiloxBlock bits = Philox4x32(AttemptCounter(offset + i, a), key);
                        for (int p = 0; p < K / 2 && !done; ++p) {
                          G::NormalPair(bits, p, v);
                          for (int k = 0; k < 2 && !done; ++k) {
                            if (std::fabs(v[k]) <= C(2)) {
                              out[i] = static_cast<T>(v[k]);
                              done = true;
                            }
                          }
                        }
                      }
                      if (!done) exhausted.store(true, std::memory_order_relaxed);
                    }
                  });
  if (exhausted.load()) {
    return absl::InternalError(absl::StrCat("TruncatedNormal found no value within two stddevs in ",
                                            kMaxAttempts, " attempts"));
  }
  return absl::OkStatus();
}

template <typename T, Dist D>
class RandomOp : public OpKernel {
 public:
  explicit RandomOp(OpKernelConstruction& c) : OpKernel(c) {
    int64_t seed = 0, seed2 = 0;
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("seed", &seed));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("seed2", &seed2));
    if (seed == 0 && seed2 == 0) {
      // TensorFlow's convention: no seed means a fresh one per kernel instance.
      std::random_device rd;
      seed = (static_cast<int64_t>(rd()) << 32) | rd();
      seed2 = (static_cast<int64_t>(rd()) << 32) | rd();
    }
    seed_key_ = {Lo(seed), Hi(seed)};
    seed2_ = static_cast<uint64_t>(seed2);
  }

  bool IsExpensive() const override { return true; }

  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(TensorShape shape, ShapeFromShapeTensor(ctx.input(0), "shape"));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, shape, &out));
    const uint64_t run = runs_.fetch_add(1, std::memory_order_relaxed);
    const PhiloxBlock k = Philox4x32({Lo(run), Hi(run), Lo(seed2_), Hi(seed2_)}, seed_key_);
    return Generate<T, D>(ctx.eigen_cpu_device(), {k[0], k[1]}, out->data<T>(),
                          out->NumElements());
  }

 private:
  PhiloxKey seed_key_;
  uint64_t seed2_ = 0;
  std::atomic<uint64_t> runs_{0};  // Compute may run for several steps at once
};

// _RandomRange: elements [offset, offset + n) of the first run of the
// random op `dist` names with these seeds (graph/ops/random_ops.h).
template <typename T>
class RandomRangeOp : public OpKernel {
 public:
  explicit RandomRangeOp(OpKernelConstruction& c) : OpKernel(c) {
    int64_t seed = 0, seed2 = 0;
    std::string dist;
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("seed", &seed));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("seed2", &seed2));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("dist", &dist));
    STRATA_KERNEL_REQUIRES_OK(c, c.GetAttr("offset", &offset_));
    if (dist != "uniform" && dist != "normal" && dist != "truncated_normal") {
      STRATA_KERNEL_REQUIRES_OK(
          c, absl::InvalidArgumentError(absl::StrCat(
                 "_RandomRange: dist '", dist, "' is not uniform, normal or truncated_normal")));
    }
    if (offset_ < 0) {
      STRATA_KERNEL_REQUIRES_OK(
          c, absl::InvalidArgumentError(absl::StrCat("_RandomRange: offset ", offset_, " < 0")));
    }
    dist_ = dist == "uniform"  ? Dist::kUniform
            : dist == "normal" ? Dist::kNormal
                               : Dist::kTruncatedNormal;
    if (seed == 0 && seed2 == 0) {  // unseeded: afresh, as the ops
      std::random_device rd;
      seed = (static_cast<int64_t>(rd()) << 32) | rd();
      seed2 = (static_cast<int64_t>(rd()) << 32) | rd();
    }
    // The key of the random op's first run (RandomOp::Compute, run 0).
    const PhiloxBlock k =
        Philox4x32({0, 0, Lo(static_cast<uint64_t>(seed2)), Hi(static_cast<uint64_t>(seed2))},
                   {Lo(seed), Hi(seed)});
    key_ = {k[0], k[1]};
  }

  bool IsExpensive() const override { return true; }

  absl::Status Compute(OpKernelContext& ctx) override {
    STRATA_ASSIGN_OR_RETURN(TensorShape shape, ShapeFromShapeTensor(ctx.input(0), "shape"));
    if (offset_ > std::numeric_limits<int64_t>::max() - shape.num_elements()) {
      return absl::InvalidArgumentError(absl::StrCat("_RandomRange: offset ", offset_, " + ",
                                                     shape.num_elements(), " elements overflows"));
    }
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, shape, &out));
    const auto& dev = ctx.eigen_cpu_device();
    const int64_t n = out->NumElements();
    switch (dist_) {
      case Dist::kUniform:
        return Generate<T, Dist::kUniform>(dev, key_, out->data<T>(), n, offset_);
      case Dist::kNormal:
        return Generate<T, Dist::kNormal>(dev, key_, out->data<T>(), n, offset_);
      case Dist::kTruncatedNormal:
        return Generate<T, Dist::kTruncatedNormal>(dev, key_, out->data<T>(), n, offset_);
    }
    return absl::InternalError("_RandomRange: unknown distribution");
  }

 private:
  Dist dist_ = Dist::kUniform;
  int64_t offset_ = 0;
  PhiloxKey key_;
};

// StatelessRandomUniform, TensorFlow's bits: each value is m * 2^-bits for
// the low `bits` bits m of one Philox word (bits = the mantissa's: 23 for
// float, 10 for half, 7 for bfloat16), or of two words for double (20 high
// bits from the first, 32 from the second); a block gives kPerBlock values.
template <typename T>
struct StatelessUniformBits {
  static constexpr int kPerBlock = 4;
  static constexpr int kBits = std::is_same<T, float>::value ? 23 : std::is_same<T, Eigen::half>::value ? 10 : 7;
  static T Value(const PhiloxBlock& b, int k) {
    return static_cast<T>(static_cast<float>(b[k] & ((1u << kBits) - 1)) * (1.0f / static_cast<float>(1u << kBits)));
  }
};
template <>
struct StatelessUniformBits<double> {
  static constexpr int kPerBlock = 2;
  static double Value(const PhiloxBlock& b, int k) {
    const uint64_t m = (static_cast<uint64_t>(b[2 * k] & 0xfffffu) << 32) | b[2 * k + 1];
    return static_cast<double>(m) * (1.0 / 4503599627370496.0);  // 2^-52
  }
};

absl::StatusOr<std::array<uint64_t, 2>> StatelessSeed(const Tensor& seed) {
  if (seed.dims() != 1 || seed.NumElements() != 2) {
    return absl::InvalidArgumentError(absl::StrCat("seed must have shape [2], got ", seed.shape().DebugString()));
  }
  // An int32 seed is widened with its sign, as TensorFlow does.
  auto at = [&](int i) -> uint64_t {
    return static_cast<uint64_t>(seed.dtype() == DT_INT32 ? int64_t{seed.data<int32_t>()[i]} : seed.data<int64_t>()[i]);
  };
  return std::array<uint64_t, 2>{at(0), at(1)};
}

template <typename T>
class StatelessUniformOp : public OpKernel {
 public:
  explicit StatelessUniformOp(OpKernelConstruction& c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext& ctx) override {
    using B = StatelessUniformBits<T>;
    STRATA_ASSIGN_OR_RETURN(TensorShape shape, ShapeFromShapeTensor(ctx.input(0), "shape"));
    STRATA_ASSIGN_OR_RETURN(auto seed, StatelessSeed(ctx.input(1)));
    Tensor* out;
    STRATA_RETURN_IF_ERROR(ctx.allocate_output(0, shape, &out));
    const PhiloxStream stream = StatelessPhiloxStream(seed[0], seed[1]);
    T* o = out->data<T>();
    const int64_t n = out->NumElements();
    constexpr int K = B::kPerBlock;
    ctx.eigen_cpu_device().parallelFor((n + K - 1) / K, Eigen::TensorOpCost(0, K * sizeof(T), 80),
                                       [&](Eigen::Index first, Eigen::Index last) {
                                         for (Eigen::Index b = first; b < last; ++b) {
                                           const PhiloxBlock bits =
                                               Philox4x32(PhiloxAdd(stream.counter, b), stream.key);
                                           for (int k = 0; k < K && b * K + k < n; ++k) o[b * K + k] = B::Value(bits, k);
                                         }
                                       });
    return absl::OkStatus();
  }
};

#define STRATA_REGISTER_RANDOM_KERNELS(T, DT)                                                 \
  STRATA_REGISTER_KERNEL(                                                                     \
      KernelBuilder("RandomUniform").Device(kDeviceCpu).TypeConstraint("dtype", DT),          \
      RandomOp<T, Dist::kUniform>);                                                           \
  STRATA_REGISTER_KERNEL(                                                                     \
      KernelBuilder("RandomStandardNormal").Device(kDeviceCpu).TypeConstraint("dtype", DT),   \
      RandomOp<T, Dist::kNormal>);                                                            \
  STRATA_REGISTER_KERNEL(                                                                     \
      KernelBuilder("TruncatedNormal").Device(kDeviceCpu).TypeConstraint("dtype", DT),        \
      RandomOp<T, Dist::kTruncatedNormal>);                                                   \
  STRATA_REGISTER_KERNEL(                                                                     \
      KernelBuilder("StatelessRandomUniform").Device(kDeviceCpu).TypeConstraint("dtype", DT), \
      StatelessUniformOp<T>);                                                                 \
  STRATA_REGISTER_KERNEL(                                                                     \
      KernelBuilder("_RandomRange").Device(kDeviceCpu).TypeConstraint("dtype", DT),           \
      RandomRangeOp<T>)

STRATA_REGISTER_RANDOM_KERNELS(float, DT_FLOAT);
STRATA_REGISTER_RANDOM_KERNELS(double, DT_DOUBLE);
STRATA_REGISTER_RANDOM_KERNELS(Eigen::half, DT_HALF);
STRATA_REGISTER_RANDOM_KERNELS(Eigen::bfloat16, DT_BFLOAT16);

#undef STRATA_REGISTER_RANDOM_KERNELS

}  // namespace
}  // namespace strata
