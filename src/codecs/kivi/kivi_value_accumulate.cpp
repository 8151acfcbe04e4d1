// KiviValueCodec::accumulate: attention-weighted value sums straight from 2/4/8-bit codes, span by
// span of 64 tokens, up to four weight rows (one grouped-query-attention group) per pass over the
// lane quads; the dense layout takes every row per block in f32 (dense_codes.h).
#include <algorithm>
#include <vector>

#include "codecs/kivi/dense_codes.h"
#include "codecs/kivi/kivi_value_codec.h"
#include "codecs/kivi/value_span_sums.h"
#include "core/prefetch.h"

namespace veloxquant::kivi {

// With v_tc = min_tg + scale_tg code_tc:
//   sum_t w_t v_tc = sum_t (w_t scale_tg) code_tc + sum_t w_t min_tg.
void KiviValueCodec::accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                                float* out) const {
  if (!tiled_) return accumulate_dense_values(codes, n / 4, block_bytes_, dim_, bits_, group_, w, n, nq, out);
  const size_t quads = n / 4;
  std::vector<float> offset(4 * groups_);
  for (size_t j0 = 0; j0 < nq; j0 += 4) {
    const size_t m = std::min<size_t>(4, nq - j0);
    std::fill(offset.begin(), offset.end(), 0.0f);
    for (size_t s0 = 0; s0 < quads; s0 += kQuadsPerSpan) {
      // The next span is in flight while this one is summed.
      if (s0 + kQuadsPerSpan < quads)
        prefetch_range(codes + (s0 + kQuadsPerSpan) * block_bytes_,
                       std::min(kQuadsPerSpan, quads - s0 - kQuadsPerSpan) * block_bytes_);
      accumulate_value_span(codes + s0 * block_bytes_, block_bytes_, std::min(kQuadsPerSpan, quads - s0),
                            dim_, bits_, group_, w + j0 * n + s0 * 4, n, m, out + j0 * dim_, offset.data());
    }
    for (size_t j = 0; j < m; ++j)
      for (size_t c = 0; c < dim_; ++c) out[(j0 + j) * dim_ + c] += offset[j * groups_ + c / group_];
  }
}

}  // namespace veloxquant::kivi
