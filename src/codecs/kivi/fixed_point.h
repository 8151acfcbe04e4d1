// What KIVI's integer kernels share: the AVX-512 VNNI switch, and the 16-bit fixed-point rendering
// of a folded query (keys) or folded attention weight (values) as two int8 terms.
#pragma once

#include <cstdint>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
// GCC 12 flags its own AVX-512 intrinsics (the _mm512_undefined_* idiom) as uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#define VELOXQUANT_KIVI_VNNI 1
#endif

namespace veloxquant::kivi {

// A value v with |v| <= peak becomes x = round(v * kFixedScale / peak), |x| <= 32512, split
// exactly as x = 256 hi + lo with hi in [-127, 127] and lo in [-128, 127]: two u8 x s8 dot products
// then give 15-bit precision.
inline constexpr float kFixedScale = 127.0f * 256.0f;

inline void split_fixed(int32_t x, int8_t& hi, int8_t& lo) {
  const int32_t h = (x + 128) >> 8;  // floor division
  hi = static_cast<int8_t>(h);
  lo = static_cast<int8_t>(x - 256 * h);
}

}  // namespace veloxquant::kivi
