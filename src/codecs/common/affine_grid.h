// The asymmetric min/max grid KIVI quantizes on, with scale and minimum stored in fp16; shared
// by every method built on KIVI's grids (cachegen, gear, kitty, palu, svdq, xquant, zipcache).
// The stored minimum is rounded down and the stored step rounded up, so the stored grid always
// covers [min, max] and every element's error is at most half of the stored step.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant {

struct AffineGrid {
  uint16_t scale_f16 = 0, min_f16 = 0;  // what is stored
  float scale = 0, min = 0;             // their exact f32 values
  unsigned levels = 0;                  // 2^bits - 1

  static AffineGrid fit(float lo, float hi, unsigned bits) {
    AffineGrid g;
    g.levels = (1u << bits) - 1u;
    g.min_f16 = f32_to_f16(lo);
    g.min = f16_to_f32(g.min_f16);
    if (g.min > lo) g.min_f16 = next_down(g.min_f16), g.min = f16_to_f32(g.min_f16);
    const float step = (hi - g.min) / static_cast<float>(g.levels);
    g.scale_f16 = f32_to_f16(step);
    g.scale = f16_to_f32(g.scale_f16);
    // Round the step up until the top of the grid reaches hi (f16 rounding may have cut it).
    while (g.min + g.scale * static_cast<float>(g.levels) < hi) {
      g.scale_f16 = static_cast<uint16_t>(g.scale_f16 + 1);
      g.scale = f16_to_f32(g.scale_f16);
    }
    return g;
  }

  uint8_t quantize(float x) const {
    if (scale == 0) return 0;
    const float c = std::nearbyint((x - min) / scale);
    return static_cast<uint8_t>(c < 0 ? 0 : (c > static_cast<float>(levels) ? levels : c));
  }

 private:
  // The next f16 toward -infinity (finite inputs only).
  static uint16_t next_down(uint16_t h) {
    if (h == 0x0000) return 0x8001;
    return (h & 0x8000) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h - 1);
  }
};

// Codes read back from a file (a session) may be corrupt. fit() only stores finite minimums and
// finite steps >= 0; anything else would make decode return NaN and the fused kernels convert
// NaN or out-of-range products to integers (undefined behaviour in their portable paths, found
// by fuzz/codec_fuzzer.cpp), so the codecs refuse it before reading the codes. `scales` and
// `mins` hold `count` fp16 values each.
inline void check_stored_grids(const uint16_t* scales, const uint16_t* mins, size_t count,
                               const char* stream, size_t block) {
  for (size_t i = 0; i < count; ++i) {
    // A group of negative zeros stores the step -0 (0x8000), which is as good as 0.
    const bool step_ok = (scales[i] & 0x7C00) != 0x7C00 && ((scales[i] & 0x8000) == 0 || scales[i] == 0x8000);
    const bool min_ok = (mins[i] & 0x7C00) != 0x7C00;  // exponent all ones: infinity or NaN
    if (!step_ok || !min_ok) {
      throw Error("kivi: corrupt " + std::string(stream) + " codes: block " + std::to_string(block) +
                  ", parameter " + std::to_string(i) + " stores step " +
                  std::to_string(f16_to_f32(scales[i])) + " and minimum " +
                  std::to_string(f16_to_f32(mins[i])) +
                  "; expected a finite step >= 0 and a finite minimum");
    }
  }
}

}  // namespace veloxquant
