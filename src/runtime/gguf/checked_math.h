// Overflow-checked arithmetic on file sizes and offsets: a hostile file can make any product or sum
// of its fields wrap around, so every one is computed through these and checked before use.
#pragma once

#include <cstdint>
#include <optional>

namespace veloxquant::gguf {

inline std::optional<uint64_t> checked_add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// x rounded up to a multiple of `alignment`. REQUIRES: alignment is a power of two.
inline std::optional<uint64_t> checked_align_up(uint64_t x, uint64_t alignment) {
  const auto bumped = checked_add(x, alignment - 1);
  if (!bumped) return std::nullopt;
  return *bumped & ~(alignment - 1);
}

inline bool is_power_of_two(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace veloxquant::gguf
