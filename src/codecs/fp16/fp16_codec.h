// Exact half-precision storage: the uncompressed baseline, and the residual window of every
// method that keeps recent tokens unquantized.
#pragma once

#include "veloxquant/codec.h"

namespace veloxquant {

class Fp16Codec final : public Codec {
 public:
  explicit Fp16Codec(size_t dim) : dim_(dim) {}
  size_t dim() const override { return dim_; }
  size_t code_bytes(size_t n) const override { return n * dim_ * 2; }
  size_t state_bytes() const override { return 0; }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses infinities and NaNs, which encode() never writes (the cache refuses them on append).
  void check_codes(const uint8_t* codes, size_t n) const override;
  bool fused_score() const override { return true; }
  bool fused_accumulate() const override { return true; }
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n,
             float* scores) const override;
  void accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                  float* out) const override;

 private:
  size_t dim_;
};

}  // namespace veloxquant
