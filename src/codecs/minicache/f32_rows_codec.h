// Rows of f32, stored as they are: the layout minicache's views hand to attention. A merged token
// is its layer's magnitude times the shared direction, which may exceed the fp16 range even
// where the token's own elements do not, so the view is not fp16.
#pragma once

#include <cstring>

#include "veloxquant/codec.h"

namespace veloxquant::minicache {

class F32RowsCodec final : public Codec {
 public:
  explicit F32RowsCodec(size_t dim) : dim_(dim) {}
  size_t dim() const override { return dim_; }
  size_t code_bytes(size_t n) const override { return n * dim_ * sizeof(float); }
  size_t state_bytes() const override { return 0; }
  void encode(const float* x, size_t n, uint8_t* codes) const override { std::memcpy(codes, x, code_bytes(n)); }
  void decode(const uint8_t* codes, size_t n, float* x) const override { std::memcpy(x, codes, code_bytes(n)); }

 private:
  size_t dim_;
};

}  // namespace veloxquant::minicache
