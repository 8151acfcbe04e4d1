// This file is compiled with -ffp-contract=off (CMakeLists.txt): `scale * q + offset` must round
// twice, as numpy's `d * q - m` does, not once as a fused multiply-add.
#include "runtime/gguf/block_decoders.h"

#include "runtime/gguf/block_codes.h"

namespace veloxquant::gguf {
namespace {

// The formula of block_codes.h in f32. numpy computes d * q and then subtracts m (k-quants) or
// adds m (Q4_1, Q5_1); adding -m rounds the same. Without a min nothing is added, which keeps the
// sign of a zero product.
template <class Codes>
void decode_block(const uint8_t* block, float* out) {
  constexpr size_t kGroups = Codes::kElements / Codes::kGroup;
  uint8_t code[Codes::kElements];
  float scale[kGroups], offset[kGroups];
  Codes::unpack(block, code, scale, offset);
  for (size_t e = 0; e < Codes::kElements; ++e) {
    const size_t g = e / Codes::kGroup;
    const float v = scale[g] * static_cast<float>(static_cast<int>(code[e]) - Codes::kCodeOffset);
    out[e] = Codes::kHasMin ? v + offset[g] : v;
  }
}

}  // namespace

BlockDecoder block_decoder(GgmlType type) {
  BlockDecoder decoder = nullptr;
  with_block_codes(type, [&](auto codes) { decoder = decode_block<decltype(codes)>; });
  return decoder;
}

}  // namespace veloxquant::gguf
