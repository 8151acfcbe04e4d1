#include "codecs/kivi/value_span_sums.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "codecs/kivi/fixed_point.h"
#include "codecs/kivi/lane_tiles.h"
#include "veloxquant/tensor.h"


namespace veloxquant::kivi {
namespace {
size_t quad_bytes(size_t dim, unsigned bits) { return 4 * dim * bits / 8; }
}  // namespace

void accumulate_value_span_reference(const uint8_t* blocks, size_t block_bytes, size_t quads, size_t dim,
                         unsigned bits, size_t group, const float* w, size_t ldw, size_t nq,
                         float* out, float* offset) {
  const size_t groups = dim / group, qb = quad_bytes(dim, bits);
  std::vector<uint8_t> codes(4 * dim);
  std::vector<int8_t> hi(quads * groups * 4), lo(quads * groups * 4);
  std::vector<int32_t> acc_hi(dim), acc_lo(dim);
  for (size_t j = 0; j < nq; ++j) {
    const float* wj = w + j * ldw;
    auto param = [&](size_t s, size_t k) {  // k < 4 * groups: scale, else min
      return f16_to_f32(reinterpret_cast<const uint16_t*>(blocks + s * block_bytes + qb)[k]);
    };
    for (size_t g = 0; g < groups; ++g) {
      float peak = 0;
      for (size_t s = 0; s < quads; ++s)
        for (size_t t = 0; t < 4; ++t) {
          peak = std::max(peak, wj[s * 4 + t] * param(s, g * 4 + t));
          offset[j * groups + g] += wj[s * 4 + t] * param(s, 4 * groups + g * 4 + t);
        }
      const float inv = peak > 0 ? kFixedScale / peak : 0.0f;
      for (size_t s = 0; s < quads; ++s)
        for (size_t t = 0; t < 4; ++t) {
          const size_t k = (s * groups + g) * 4 + t;
          split_fixed(static_cast<int32_t>(std::nearbyint(wj[s * 4 + t] * param(s, g * 4 + t) * inv)), hi[k], lo[k]);
        }
      std::fill(acc_hi.begin(), acc_hi.end(), 0);
      std::fill(acc_lo.begin(), acc_lo.end(), 0);
      for (size_t s = 0; s < quads; ++s) {
        unpack_value_quad(blocks + s * block_bytes, dim, bits, codes.data());
        for (size_t t = 0; t < 4; ++t)
          for (size_t c = g * group; c < (g + 1) * group; ++c) {
            acc_hi[c] += codes[t * dim + c] * hi[(s * groups + g) * 4 + t];
            acc_lo[c] += codes[t * dim + c] * lo[(s * groups + g) * 4 + t];
          }
      }
      for (size_t c = g * group; c < (g + 1) * group; ++c) {
        out[j * dim + c] += peak / kFixedScale *
                            (static_cast<float>(acc_hi[c]) * 256.0f + static_cast<float>(acc_lo[c]));
      }
    }
  }
}

namespace {

#ifdef VELOXQUANT_KIVI_VNNI
inline float lanes_sum_block(__m512 v, int block) {  // sum of the 4 lanes of 128-bit block `block`
  alignas(64) float x[16];
  _mm512_store_ps(x, v);
  return x[4 * block] + x[4 * block + 1] + x[4 * block + 2] + x[4 * block + 3];
}

// REQUIRES: 4 * groups <= 16 (a quad's parameter row fits one register), dim % 16 == 0.
template <size_t NQ>
void accumulate_vnni(const uint8_t* blocks, size_t block_bytes, size_t quads, size_t dim,
                     unsigned bits, size_t group, const float* w, size_t ldw, float* out,
                     float* offset) {
  const size_t groups = dim / group, row = 4 * groups, qb = quad_bytes(dim, bits);
  const __mmask16 lanes = static_cast<__mmask16>((1u << row) - 1u);
  // Pass 1: folded weights [j][s][group][token], their per-group peak, and the min terms.
  __m512 folded[NQ][kQuadsPerSpan], peak[NQ], off[NQ];
  for (size_t j = 0; j < NQ; ++j) peak[j] = off[j] = _mm512_setzero_ps();
  for (size_t s = 0; s < quads; ++s) {
    const auto* params = reinterpret_cast<const uint16_t*>(blocks + s * block_bytes + qb);
    const __m512 scale = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, params));
    const __m512 mins = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, params + row));
    for (size_t j = 0; j < NQ; ++j) {
      const __m512 w4 = _mm512_broadcast_f32x4(_mm_loadu_ps(w + j * ldw + s * 4));  // w0..w3 per group
      folded[j][s] = _mm512_mul_ps(w4, scale);
      peak[j] = _mm512_max_ps(peak[j], folded[j][s]);
      off[j] = _mm512_fmadd_ps(w4, mins, off[j]);
    }
  }
  // Pass 2: two int8 terms per weight (x = 256 hi + lo), laid out as the integer kernel reads them.
  alignas(64) int8_t hi[NQ][kQuadsPerSpan][16], lo[NQ][kQuadsPerSpan][16];
  __m512 unit[NQ];
  for (size_t j = 0; j < NQ; ++j) {
    __m512 p = _mm512_max_ps(peak[j], _mm512_permute_ps(peak[j], 0xb1));  // max within lane pairs
    p = _mm512_max_ps(p, _mm512_permute_ps(p, 0x4e));                      // then within 4-lane groups
    unit[j] = _mm512_mul_ps(p, _mm512_set1_ps(1.0f / kFixedScale));
    const __mmask16 live = _mm512_cmp_ps_mask(p, _mm512_setzero_ps(), _CMP_GT_OQ);
    const __m512 inv = _mm512_maskz_div_ps(live, _mm512_set1_ps(kFixedScale), p);
    for (size_t s = 0; s < quads; ++s) {
      const __m512i x = _mm512_cvtps_epi32(_mm512_mul_ps(folded[j][s], inv));
      const __m512i h = _mm512_srai_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(128)), 8);
      const __m512i l = _mm512_sub_epi32(x, _mm512_slli_epi32(h, 8));
      _mm_store_si128(reinterpret_cast<__m128i*>(hi[j][s]), _mm512_cvtsepi32_epi8(h));
      _mm_store_si128(reinterpret_cast<__m128i*>(lo[j][s]), _mm512_cvtsepi32_epi8(l));
    }
    for (size_t g = 0; g < groups; ++g) offset[j * groups + g] += lanes_sum_block(off[j], static_cast<int>(g));
  }
  // Pass 3: integer sums, one 16-channel slice at a time over every quad of the span.
  const size_t rc = value_row_channels(bits);
  const unsigned cpb = codes_per_byte(bits);
  const __m512i mask = _mm512_set1_epi8(static_cast<char>((1u << bits) - 1u));
  alignas(64) float units[NQ][16];
  for (size_t j = 0; j < NQ; ++j) _mm512_store_ps(units[j], unit[j]);
  for (size_t r = 0; r < dim / rc; ++r) {
    for (unsigned k = 0; k < cpb; ++k) {
      const size_t c0 = r * rc + 16 * k, g = c0 / group;
      __m512i sum_hi[NQ], sum_lo[NQ];
      for (size_t j = 0; j < NQ; ++j) sum_hi[j] = sum_lo[j] = _mm512_setzero_si512();
      for (size_t s = 0; s < quads; ++s) {
        const __m512i v = _mm512_loadu_si512(blocks + s * block_bytes + r * kRowBytes);
        const __m512i c8 = _mm512_and_si512(_mm512_srli_epi16(v, bits * k), mask);
        for (size_t j = 0; j < NQ; ++j) {
          int32_t h4, l4;
          std::memcpy(&h4, hi[j][s] + 4 * g, 4);
          std::memcpy(&l4, lo[j][s] + 4 * g, 4);
          sum_hi[j] = _mm512_dpbusd_epi32(sum_hi[j], c8, _mm512_set1_epi32(h4));
          sum_lo[j] = _mm512_dpbusd_epi32(sum_lo[j], c8, _mm512_set1_epi32(l4));
        }
      }
      for (size_t j = 0; j < NQ; ++j) {
        float* o = out + j * dim + c0;
        const __m512 total = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum_hi[j]), _mm512_set1_ps(256.0f),
                                             _mm512_cvtepi32_ps(sum_lo[j]));
        _mm512_storeu_ps(o, _mm512_fmadd_ps(total, _mm512_set1_ps(units[j][4 * g]), _mm512_loadu_ps(o)));
      }
    }
  }
}
#endif

}  // namespace

void accumulate_value_span(const uint8_t* blocks, size_t block_bytes, size_t quads, size_t dim,
                           unsigned bits, size_t group, const float* w, size_t ldw, size_t nq,
                           float* out, float* offset) {
#ifdef VELOXQUANT_KIVI_VNNI
  if (4 * (dim / group) <= 16 && dim % 16 == 0 && quads <= kQuadsPerSpan) {
    switch (nq) {
      case 1: return accumulate_vnni<1>(blocks, block_bytes, quads, dim, bits, group, w, ldw, out, offset);
      case 2: return accumulate_vnni<2>(blocks, block_bytes, quads, dim, bits, group, w, ldw, out, offset);
      case 3: return accumulate_vnni<3>(blocks, block_bytes, quads, dim, bits, group, w, ldw, out, offset);
      default: return accumulate_vnni<4>(blocks, block_bytes, quads, dim, bits, group, w, ldw, out, offset);
    }
  }
#endif
  accumulate_value_span_reference(blocks, block_bytes, quads, dim, bits, group, w, ldw, nq, out, offset);
}

}  // namespace veloxquant::kivi
