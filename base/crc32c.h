// CRC32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78), the
// checksum of checkpoint files. Uses the SSE4.2 crc32 instruction when the
// CPU has it (checked once at run time) and a slicing-by-8 table otherwise;
// both give the same values.
//
//   uint32_t c = crc32c::Value("123456789", 9);        // 0xE3069283
//   uint32_t d = crc32c::Extend(crc32c::Value(a, n), b, m);  // == Value(a ++ b)
//
// Thread-safety: pure functions, safe from any thread.
#ifndef STRATA_BASE_CRC32C_H_
#define STRATA_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace strata {
namespace crc32c {

// The CRC32C of data[0, n) appended to a message whose CRC32C is `crc`
// (0 for the empty message).
uint32_t Extend(uint32_t crc, const void* data, size_t n);

// The CRC32C of data[0, n).
inline uint32_t Value(const void* data, size_t n) { return Extend(0, data, n); }

// The table implementation, whatever the CPU (for tests and benchmarks).
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n);

// True if Extend uses the SSE4.2 instruction on this CPU.
bool HardwareAccelerated();

}  // namespace crc32c
}  // namespace strata

#endif  // STRATA_BASE_CRC32C_H_
