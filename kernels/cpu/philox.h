// Philox-4x32-10, the counter-based random number generator of Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3" (SC 2011), which TensorFlow
// and cuRAND also use. Philox maps (64-bit key, 128-bit counter) to 128
// random bits with no state in between, so block i of a stream can be made
// on any thread, in any order, and always comes out the same: random kernels
// split their output over threads without changing a single number.
//
//   PhiloxKey key = {seed_lo, seed_hi};
//   PhiloxBlock bits = Philox4x32({i_lo, i_hi, stream_lo, stream_hi}, key);
//   float u = Uint32ToUniformFloat(bits[0]);   // [0, 1)
//
// The helpers turn the raw bits into uniform and normal values. Everything
// here is a pure function: thread-safe, no ownership.
#ifndef STRATA_KERNELS_CPU_PHILOX_H_
#define STRATA_KERNELS_CPU_PHILOX_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace strata {

using PhiloxBlock = std::array<uint32_t, 4>;  // a counter, or 128 output bits
using PhiloxKey = std::array<uint32_t, 2>;

// Philox-4x32 with 10 rounds. Matches the published known-answer vectors
// (e.g. counter 0, key 0 -> 6627e8d5 e169c58d bc57ac4c 9b00dbd8).
inline PhiloxBlock Philox4x32(PhiloxBlock ctr, PhiloxKey key) {
  constexpr uint32_t kMul0 = 0xD2511F53;
  constexpr uint32_t kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9;  // golden ratio
  constexpr uint32_t kWeyl1 = 0xBB67AE85;  // sqrt(3) - 1
  for (int round = 0; round < 10; ++round) {
    // One round: two 32x32->64 multiplies, their halves mixed with the other
    // two words and the key; the key is bumped between rounds.
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * ctr[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * ctr[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return ctr;
}

// TensorFlow's stateless streams (StatelessRandomUniform and friends): the
// two 64-bit seeds, as a counter, are scrambled by one Philox call under a
// fixed key into the stream's key and its starting counter, so that weak
// seeds (0, 1, ...) still give unrelated streams. Block i of the stream is
// Philox4x32(PhiloxAdd(counter, i), key).
struct PhiloxStream {
  PhiloxKey key;
  PhiloxBlock counter;
};
inline PhiloxStream StatelessPhiloxStream(uint64_t seed0, uint64_t seed1) {
  const PhiloxBlock mix =
      Philox4x32({static_cast<uint32_t>(seed0), static_cast<uint32_t>(seed0 >> 32),
                  static_cast<uint32_t>(seed1), static_cast<uint32_t>(seed1 >> 32)},
                 {0x3ec8f720u, 0x02461e29u});
  return {{mix[0], mix[1]}, {0, 0, mix[2], mix[3]}};
}

// The 128-bit counter `c` (word 0 lowest) plus n.
inline PhiloxBlock PhiloxAdd(PhiloxBlock c, uint64_t n) {
  const uint64_t lo = (static_cast<uint64_t>(c[1]) << 32 | c[0]) + n;
  const bool carry = lo < n;
  c[0] = static_cast<uint32_t>(lo);
  c[1] = static_cast<uint32_t>(lo >> 32);
  if (carry && ++c[2] == 0) ++c[3];
  return c;
}

// Uniform in [0, 1) from the top 23 bits: a float in [1, 2) minus 1, so every
// value is exact and 1.0 never appears.
inline float Uint32ToUniformFloat(uint32_t x) {
  const uint32_t bits = 0x3f800000u | (x >> 9);
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f - 1.0f;
}

// Uniform in [0, 1) from 52 bits of two words, the same way.
inline double Uint64ToUniformDouble(uint32_t hi, uint32_t lo) {
  const uint64_t x = (static_cast<uint64_t>(hi) << 32) | lo;
  const uint64_t bits = 0x3ff0000000000000ull | (x >> 12);
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d - 1.0;
}

// Box-Muller: two independent standard normals from two uniforms in [0, 1).
// u1 is moved into (0, 1] so that log never sees 0.
template <typename T>
inline void BoxMuller(T u1, T u2, T* n1, T* n2) {
  constexpr T kTwoPi = static_cast<T>(6.283185307179586476925286766559);
  const T r = std::sqrt(static_cast<T>(-2) * std::log(static_cast<T>(1) - u1));
  const T theta = kTwoPi * u2;
  *n1 = r * std::cos(theta);
  *n2 = r * std::sin(theta);
}

}  // namespace strata

#endif  // STRATA_KERNELS_CPU_PHILOX_H_
