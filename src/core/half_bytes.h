// fp16 values stored at arbitrary byte offsets of a codec's block (little-endian, unaligned).
#pragma once

#include <cstdint>
#include <cstring>

namespace veloxquant {

inline uint16_t load_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

inline void store_half(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }

}  // namespace veloxquant
