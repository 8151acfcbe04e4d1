// Decode-then-compute defaults for codecs without a fused path. Work in chunks so that scoring a
// long stream never materializes it whole.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
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

// The bytes of the m tokens at `codes`, which encode() wrote or check_codes() accepted (the
// REQUIRES of score() and accumulate()): no bound to check them against.
size_t trusted_bytes(const Codec& c, const uint8_t* codes, size_t m) {
  return c.encoded_bytes(codes, m, std::numeric_limits<size_t>::max());
}
}  // namespace

size_t Codec::encoded_block_bytes(const uint8_t* /*block*/, size_t available) const {
  const size_t bytes = code_bytes(block_tokens());
  if (bytes > available) {
    throw Error(fmt::format("a block of {} tokens needs {} bytes; {} are left", block_tokens(), bytes,
                            available));
  }
  return bytes;
}

size_t Codec::encoded_bytes(const uint8_t* codes, size_t n, size_t available) const {
  if (!variable_length()) {
    const size_t bytes = code_bytes(n);
    if (bytes > available) {
      throw Error(fmt::format("the codes of {} tokens need {} bytes; {} are there", n, bytes, available));
    }
    return bytes;
  }
  const size_t block = block_tokens(), blocks = n / block;
  size_t at = 0;
  for (size_t b = 0; b < blocks; ++b) {
    try {
      at += encoded_block_bytes(codes + at, available - at);
    } catch (const Error& e) {
      throw Error(fmt::format("block {} of {} (tokens {}..{}, from byte {} of {}): {}", b, blocks,
                              b * block, (b + 1) * block - 1, at, available, e.what()));
    }
  }
  return at;
}

void Codec::select(const float*, size_t nq, const uint8_t*, size_t n, uint8_t* keep) const {
  std::fill(keep, keep + nq * n, uint8_t{1});
}

void Codec::score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const {
  const size_t d = dim(), chunk = chunk_tokens(*this);
  std::vector<float> x(chunk * d), s(nq * chunk);
  for (size_t t0 = 0; t0 < n; t0 += chunk) {
    const size_t m = std::min(chunk, n - t0);
    decode(codes, m, x.data());
    codes += trusted_bytes(*this, codes, m);
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
    decode(codes, m, x.data());
    codes += trusted_bytes(*this, codes, m);
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
  // A basis fitted to no vectors is undefined (the fit divides by the token count).
  if (n == 0) throw ShapeError("codec_for_stream got 0 tokens; expected at least 1 to fit the stream to");
  return codec.with_states(codec.fit_streams(x, n, 1), 0);
}

}  // namespace veloxquant
