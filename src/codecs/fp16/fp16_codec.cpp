#include "codecs/fp16/fp16_codec.h"

#include <fmt/format.h>

#include "codecs/fp16/method.h"
#include "core/simd.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant {
namespace {
const uint16_t* halves(const uint8_t* p) { return reinterpret_cast<const uint16_t*>(p); }
}  // namespace

void Fp16Codec::encode(const float* x, size_t n, uint8_t* codes) const {
  simd::f32_to_f16(x, reinterpret_cast<uint16_t*>(codes), n * dim_);
}

void Fp16Codec::decode(const uint8_t* codes, size_t n, float* x) const {
  simd::f16_to_f32(halves(codes), x, n * dim_);
}

void Fp16Codec::check_codes(const uint8_t* codes, size_t n) const {
  const uint16_t* h = halves(codes);
  for (size_t i = 0; i < n * dim_; ++i) {
    if ((h[i] & 0x7C00) == 0x7C00) {  // exponent all ones: infinity or NaN
      throw Error(fmt::format("fp16: corrupt codes: token {}, channel {} holds {}; expected a "
                              "finite half", i / dim_, i % dim_, f16_to_f32(h[i])));
    }
  }
}

void Fp16Codec::score(const float* q, size_t nq, const uint8_t* codes, size_t n,
                      float* scores) const {
  simd::dot_f16_rows(q, nq, halves(codes), n, dim_, scores);
}

void Fp16Codec::accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                           float* out) const {
  simd::accumulate_f16_rows(w, nq, halves(codes), n, dim_, out);
}

MethodInfo fp16_method() {
  MethodInfo m;
  m.name = "fp16";
  m.family = "baseline";
  m.paper = "none (uncompressed reference)";
  m.summary = "keys and values stored exactly in IEEE half precision";
  m.make = [](const Params&, const LayerShape& s) {
    LayerCodecs c;
    c.key = std::make_unique<Fp16Codec>(s.head_dim);
    c.value = std::make_unique<Fp16Codec>(s.head_dim);
    return c;
  };
  m.cuda_config = [](const Params&, const LayerShape&, cuda::CacheConfig& c) {
    c.format = "fp16";
    return std::string();
  };
  return m;
}

}  // namespace veloxquant
