// KiviKeyCodec::score: attention scores straight from 2/4/8-bit codes, block by block, up to four
// queries (one grouped-query-attention group) per pass over the lane tiles; the dense layout
// scores every query per block in f32 (dense_codes.h).
#include <algorithm>

#include "codecs/kivi/dense_codes.h"
#include "codecs/kivi/key_block_scores.h"
#include "codecs/kivi/kivi_key_codec.h"
#include "core/prefetch.h"

namespace veloxquant::kivi {

void KiviKeyCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n,
                         float* scores) const {
  if (!tiled_) return score_dense_keys(codes, n / group_, block_bytes_, dim_, bits_, group_, q, nq, scores, n);
  // Blocks are a few KiB: the next four are in flight while one is scored.
  constexpr size_t kAhead = 4;
  const size_t blocks = n / group_;
  for (size_t b = 0; b < blocks; ++b) {
    if (b + kAhead < blocks) prefetch_range(codes + (b + kAhead) * block_bytes_, block_bytes_);
    for (size_t j0 = 0; j0 < nq; j0 += 4)
      score_key_block(codes + b * block_bytes_, dim_, bits_, group_, q + j0 * dim_,
                      std::min<size_t>(4, nq - j0), scores + j0 * n + b * group_, n);
  }
}

}  // namespace veloxquant::kivi
