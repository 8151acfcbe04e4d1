// Decode-then-compute defaults for codecs without a fused path. Work in chunks so that scoring a
// long stream never materializes it whole.
#include <algorithm>
#include <vector>

#include "core/simd.h"
#include "veloxquant/codec.h"

namespace veloxquant {
namespace {
size_t chunk_tokens(const Codec& c) {
  const size_t b = c.block_tokens();
  return std::max<size_t>(1, 256 / b) * b;
}
}  // namespace

void Codec::score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const {
  const size_t d = dim(), chunk = chunk_tokens(*this);
  std::vector<float> x(chunk * d), s(nq * chunk);
  for (size_t t0 = 0; t0 < n; t0 += chunk) {
    const size_t m = std::min(chunk, n - t0);
    decode(codes + code_bytes(t0), m, x.data());
    simd::dot_f32_rows(q, nq, x.data(), m, d, s.data());
    for (size_t i = 0; i < nq; ++i) std::copy_n(s.data() + i * m, m, scores + i * n + t0);
  }
}

void Codec::accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                       float* out) const {
  const size_t d = dim(), chunk = chunk_tokens(*this);
  std::vector<float> x(chunk * d), wc(nq * chunk);
  for (size_t t0 = 0; t0 < n; t0 += chunk) {
    const size_t m = std::min(chunk, n - t0);
    decode(codes + code_bytes(t0), m, x.data());
    for (size_t i = 0; i < nq; ++i) std::copy_n(w + i * n + t0, m, wc.data() + i * m);
    simd::accumulate_f32_rows(wc.data(), nq, x.data(), m, d, out);
  }
}

}  // namespace veloxquant
