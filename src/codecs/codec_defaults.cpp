// Decode-then-compute defaults for codecs without a fused path. Work in chunks so that scoring a
// long stream never materializes it whole.
#include <algorithm>
#include <vector>

#include "core/simd.h"
#include "veloxquant/error.h"
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

std::vector<std::vector<uint8_t>> Codec::fit_streams(const float*, size_t, size_t) const {
  throw Error("this codec is not fitted per stream (fits_streams() is false)");
}

std::unique_ptr<Codec> Codec::with_states(const std::vector<std::vector<uint8_t>>&, size_t) const {
  throw Error("this codec is not fitted per stream (fits_streams() is false)");
}

std::shared_ptr<const Codec> codec_for_stream(const Codec& codec, const float* x, size_t n) {
  if (!codec.fits_streams()) return std::shared_ptr<const Codec>(std::shared_ptr<const Codec>(), &codec);
  return codec.with_states(codec.fit_streams(x, n, 1), 0);
}

}  // namespace veloxquant
