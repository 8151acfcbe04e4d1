// KIVI values (Liu et al., ICML 2024): quantized per token, each token's channels split into
// groups sharing one asymmetric min/max grid, because value errors should stay local to a token.
// Block of 4 tokens: one value quad of codes, then fp16 scale[groups][4], fp16 min[groups][4].
#pragma once

#include <memory>
#include <string>

#include "veloxquant/codec.h"

namespace veloxquant::kivi {

class KiviValueCodec final : public Codec {
 public:
  // REQUIRES (checked by the method): bits in {2, 4, 8}; group % 16 == 0 and dim % group == 0;
  // dim % (128 / bits) == 0. A group larger than dim means one group per token.
  KiviValueCodec(size_t dim, unsigned bits, size_t group);
  // Checks those requirements for a method's parameters and throws SpecError naming the method,
  // the parameter and the rule it breaks. Shared by every method that stores KIVI values.
  static std::unique_ptr<KiviValueCodec> create(const std::string& method, size_t dim, long bits,
                                                const char* bits_name, long group,
                                                const char* group_name);
  size_t dim() const override { return dim_; }
  size_t block_tokens() const override { return 4; }
  size_t code_bytes(size_t n) const override { return n / 4 * block_bytes_; }
  size_t state_bytes() const override { return 0; }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  bool fused_accumulate() const override { return true; }
  // Weighted sums from codes: attention weights times per-token scales are split into two int8
  // terms (15-bit precision, one scale per query, channel group and span of 64 tokens), then
  // summed by u8 x s8 dot products.
  void accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                  float* out) const override;

 private:
  size_t dim_, group_, groups_, quad_bytes_, block_bytes_;
  unsigned bits_;
};

}  // namespace veloxquant::kivi
