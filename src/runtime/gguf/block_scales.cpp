#include "runtime/gguf/block_scales.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/gguf/ggml_types.h"
#include "veloxquant/tensor.h"

namespace veloxquant::gguf {
namespace {

// Byte offsets of each block's fp16 scale fields, as ggml lays its block structs out.
std::vector<size_t> scale_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: case GgmlType::Q5_0: case GgmlType::Q8_0: case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS: return {0};
    case GgmlType::Q4_1: case GgmlType::Q5_1: case GgmlType::Q4_K: case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q2_K: return {80, 82};  // after scales[16] and qs[64]
    case GgmlType::Q3_K: return {108};     // after hmask[32], qs[64] and scales[12]
    case GgmlType::Q6_K: return {208};     // after ql[128], qh[64] and scales[16]
    default: return {};
  }
}

}  // namespace

void check_block_scales(const std::string& tensor, GgmlType type, std::span<const uint8_t> data) {
  const std::vector<size_t> offsets = scale_offsets(type);
  if (offsets.empty()) return;
  const size_t block = ggml_block_bytes(type), blocks = data.size() / block;
  for (size_t b = 0; b < blocks; ++b) {
    for (size_t at : offsets) {
      uint16_t h;
      std::memcpy(&h, data.data() + b * block + at, 2);
      // A half is NaN or infinite exactly when its exponent bits are all ones.
      if ((h & 0x7c00u) != 0x7c00u) continue;
      throw FormatError(fmt::format("tensor '{}' block {} has scale {}; expected finite block scales "
                                    "(the file is damaged or was written wrongly)",
                                    tensor, b, f16_to_f32(h)));
    }
  }
}

}  // namespace veloxquant::gguf
