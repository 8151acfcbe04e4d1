#include "codecs/kivi/key_block_scores.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "codecs/kivi/fixed_point.h"
#include "codecs/kivi/lane_tiles.h"
#include "veloxquant/tensor.h"


namespace veloxquant::kivi {

void score_key_block_reference(const uint8_t* block, size_t dim, unsigned bits, size_t group,
                              const float* q, size_t nq, float* out, size_t ld) {
  const auto* halves = reinterpret_cast<const uint16_t*>(block);
  const size_t rc = key_row_channels(bits), tile_bytes = kLanes * dim * bits / 8;
  const unsigned cpb = codes_per_byte(bits), mask = (1u << bits) - 1u;
  std::vector<int8_t> hi(dim), lo(dim);
  for (size_t j = 0; j < nq; ++j) {
    const float* qj = q + j * dim;
    float peak = 0, offset = 0;
    for (size_t c = 0; c < dim; ++c) {
      peak = std::max(peak, std::fabs(qj[c] * f16_to_f32(halves[c])));
      offset += qj[c] * f16_to_f32(halves[dim + c]);
    }
    const float inv = peak > 0 ? kFixedScale / peak : 0.0f, step = peak / kFixedScale;
    for (size_t c = 0; c < dim; ++c) {
      split_fixed(static_cast<int32_t>(std::nearbyint(qj[c] * f16_to_f32(halves[c]) * inv)), hi[c], lo[c]);
    }
    for (size_t tile = 0; tile < group / kLanes; ++tile) {
      const uint8_t* codes = block + 4 * dim + tile * tile_bytes;
      for (size_t lane = 0; lane < kLanes; ++lane) {
        int32_t sum_hi = 0, sum_lo = 0;
        for (size_t row = 0; row < dim / rc; ++row)
          for (size_t i = 0; i < 4; ++i) {
            const unsigned byte = codes[row * kRowBytes + lane * 4 + i];
            for (unsigned k = 0; k < cpb; ++k) {
              const int32_t code = static_cast<int32_t>((byte >> (bits * k)) & mask);
              sum_hi += code * hi[row * rc + 4 * k + i];
              sum_lo += code * lo[row * rc + 4 * k + i];
            }
          }
        out[j * ld + tile * kLanes + lane] =
            step * (static_cast<float>(sum_hi) * 256.0f + static_cast<float>(sum_lo)) + offset;
      }
    }
  }
}

namespace {

#ifdef VELOXQUANT_KIVI_VNNI
inline int32_t load_i32(const int8_t* p) {
  int32_t x;
  std::memcpy(&x, p, 4);
  return x;
}

// REQUIRES: dim % 16 == 0 (every supported head_dim with kbits 2/4/8 satisfies the layout's
// dim % (32 / bits) == 0; the caller falls back to the portable path otherwise).
template <size_t NQ>
void score_key_block_vnni(const uint8_t* block, size_t dim, unsigned bits, size_t group,
                          const float* q, float* out, size_t ld) {
  const auto* halves = reinterpret_cast<const uint16_t*>(block);
  const size_t rc = key_row_channels(bits), tile_bytes = kLanes * dim * bits / 8;
  const unsigned cpb = codes_per_byte(bits);
  alignas(64) int8_t hi[NQ][512], lo[NQ][512];
  alignas(64) float folded[NQ][512];
  float step[NQ], offset[NQ];
  // Pass 1: folded query q * scale, its peak, and q . min; the block's scales are converted once
  // for all queries.
  __m512 peak[NQ], off[NQ];
  for (size_t j = 0; j < NQ; ++j) peak[j] = off[j] = _mm512_setzero_ps();
  for (size_t c = 0; c < dim; c += 16) {
    const __m512 s = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(halves + c)));
    const __m512 m = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(halves + dim + c)));
    for (size_t j = 0; j < NQ; ++j) {
      const __m512 qv = _mm512_loadu_ps(q + j * dim + c);
      const __m512 f = _mm512_mul_ps(qv, s);
      _mm512_store_ps(folded[j] + c, f);
      peak[j] = _mm512_max_ps(peak[j], _mm512_abs_ps(f));
      off[j] = _mm512_fmadd_ps(qv, m, off[j]);
    }
  }
  // Pass 2: the fixed-point split of fixed_point.h, 16 channels at a time.
  for (size_t j = 0; j < NQ; ++j) {
    const float pk = _mm512_reduce_max_ps(peak[j]);
    offset[j] = _mm512_reduce_add_ps(off[j]);
    step[j] = pk / kFixedScale;
    const __m512 inv = _mm512_set1_ps(pk > 0 ? kFixedScale / pk : 0.0f);
    for (size_t c = 0; c < dim; c += 16) {
      const __m512i x = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(folded[j] + c), inv));
      const __m512i h = _mm512_srai_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(128)), 8);
      const __m512i l = _mm512_sub_epi32(x, _mm512_slli_epi32(h, 8));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(hi[j] + c), _mm512_cvtsepi32_epi8(h));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(lo[j] + c), _mm512_cvtsepi32_epi8(l));
    }
  }
  const __m512i mask = _mm512_set1_epi8(static_cast<char>((1u << bits) - 1u));
  for (size_t tile = 0; tile < group / kLanes; ++tile) {
    const uint8_t* codes = block + 4 * dim + tile * tile_bytes;
    __m512i sum_hi[NQ], sum_lo[NQ];
    for (size_t j = 0; j < NQ; ++j) sum_hi[j] = sum_lo[j] = _mm512_setzero_si512();
    for (size_t row = 0; row < dim / rc; ++row) {
      const __m512i v = _mm512_loadu_si512(codes + row * kRowBytes);
      for (unsigned k = 0; k < cpb; ++k) {
        // Shifting 16-bit lanes is safe: the mask drops bits crossing from the neighbour byte.
        const __m512i c8 = _mm512_and_si512(_mm512_srli_epi16(v, bits * k), mask);
        const size_t c = row * rc + 4 * k;
        for (size_t j = 0; j < NQ; ++j) {
          sum_hi[j] = _mm512_dpbusd_epi32(sum_hi[j], c8, _mm512_set1_epi32(load_i32(hi[j] + c)));
          sum_lo[j] = _mm512_dpbusd_epi32(sum_lo[j], c8, _mm512_set1_epi32(load_i32(lo[j] + c)));
        }
      }
    }
    for (size_t j = 0; j < NQ; ++j) {
      const __m512 total = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum_hi[j]), _mm512_set1_ps(256.0f),
                                           _mm512_cvtepi32_ps(sum_lo[j]));
      _mm512_storeu_ps(out + j * ld + tile * kLanes,
                       _mm512_fmadd_ps(total, _mm512_set1_ps(step[j]), _mm512_set1_ps(offset[j])));
    }
  }
}
#endif

}  // namespace

void score_key_block(const uint8_t* block, size_t dim, unsigned bits, size_t group, const float* q,
                     size_t nq, float* out, size_t ld) {
#ifdef VELOXQUANT_KIVI_VNNI
  if (dim % 16 == 0 && dim <= 512) {
    switch (nq) {
      case 1: return score_key_block_vnni<1>(block, dim, bits, group, q, out, ld);
      case 2: return score_key_block_vnni<2>(block, dim, bits, group, q, out, ld);
      case 3: return score_key_block_vnni<3>(block, dim, bits, group, q, out, ld);
      default: return score_key_block_vnni<4>(block, dim, bits, group, q, out, ld);
    }
  }
#endif
  score_key_block_reference(block, dim, bits, group, q, nq, out, ld);
}

}  // namespace veloxquant::kivi
