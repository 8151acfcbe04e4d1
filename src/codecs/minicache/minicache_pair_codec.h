// MiniCache (Liu et al., NeurIPS 2024, arXiv 2405.14366) for one pair of adjacent layers: per
// token and KV head, the two layers' vectors become one shared direction (SLERP at t between
// their directions, slerp.h) plus each layer's own magnitude. In each block of G tokens the r
// tokens whose directions differ most (largest angle) are retained unmerged in both layers. The
// shared directions are stored by a base codec (minicache uses KIVI's).
//
// Per block of G tokens, head_dim d, r retained:
//   leader    base codes of the G shared directions          base.code_bytes(G)
//             (retained rows replaced by the block's first merged row, so they stay out of its grids)
//             f32 magnitude[G] of the leader's vectors        4 G
//             u16 index[r] of the retained tokens, increasing 2 r
//             fp16 row[r][d]: the leader's retained vectors   2 r d
//   follower  f32 magnitude[G] of the follower's vectors      4 G
//             fp16 row[r][d]: the follower's retained vectors 2 r d
// A layer's view is f32 rows (f32_rows_codec.h): for a merged token the decoded direction scaled
// to the layer's magnitude (so magnitudes restore exactly), for a retained one its stored row.
#pragma once

#include <memory>

#include "codecs/minicache/f32_rows_codec.h"
#include "veloxquant/pair_codec.h"

namespace veloxquant::minicache {

class MiniCachePairCodec final : public PairCodec {
 public:
  // REQUIRES (checked by the method): base.block_tokens() divides group, retained < group <= 65536,
  // 0 <= t <= 1.
  MiniCachePairCodec(std::unique_ptr<Codec> base, size_t group, size_t retained, double t);

  size_t dim() const override { return base_->dim(); }
  size_t block_tokens() const override { return group_; }
  size_t leader_bytes(size_t n) const override { return n / group_ * leader_block_; }
  size_t follower_bytes(size_t n) const override { return n / group_ * follower_block_; }
  void encode(const float* leader, const float* follower, size_t n, uint8_t* leader_codes,
              uint8_t* follower_codes) const override;
  const Codec& view_codec() const override { return view_codec_; }
  const uint8_t* view(bool follower, const uint8_t* leader_codes, const uint8_t* follower_codes,
                      size_t n, std::vector<uint8_t>& scratch) const override;
  // The base codec's checks of the directions, magnitudes finite and >= 0, retained indices
  // strictly increasing below G, retained rows finite.
  void check_codes(bool follower, const uint8_t* codes, size_t n) const override;

  size_t retained() const { return retained_; }
  // The retained tokens' indices in block b of the leader's codes.
  std::vector<size_t> retained_tokens(const uint8_t* leader_codes, size_t b) const;

 private:
  std::unique_ptr<Codec> base_;
  size_t group_, retained_;
  double t_;
  size_t base_bytes_, leader_block_, follower_block_;
  F32RowsCodec view_codec_;
};

}  // namespace veloxquant::minicache
