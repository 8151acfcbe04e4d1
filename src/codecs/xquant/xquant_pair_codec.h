// XQuant's cross-layer code sharing (Yang et al., EMNLP 2025, arXiv 2510.11236) on KIVI blocks: in
// a pair of adjacent layers the leader stores whole KIVI blocks (codes and grids), and the
// follower stores only its own grids (an fp16 step and minimum per grid), read with the leader's
// codes. The follower's grid is, as in the paper, the min/max grid of its own values
// (FollowerGrid::MinMax), or, as an option of ours, the least-squares line through its values
// against the shared codes (FollowerGrid::LeastSquares). The paper's data-free calibration
// narrows every min/max grid by eta at both ends: step' = (1 - 2 eta) step,
// min' = min + eta step (2^bits - 1); eta = 0 is KIVI's grid.
//
// Per block of B tokens (the KIVI codec's block) with P grids:
//   leader    the KIVI block: its codes and its P grids         base.block_bytes()
//   follower  fp16 step[P], fp16 min[P]                         4 P bytes
// A follower's view is the leader's block with the follower's grids in place of the leader's: a
// KIVI block, attended by KIVI's fused kernels. The leader's view is its own codes.
#pragma once

#include <memory>

#include "codecs/common/grid_codec.h"
#include "veloxquant/pair_codec.h"

namespace veloxquant::xquant {

enum class FollowerGrid { MinMax, LeastSquares };

class XQuantPairCodec final : public PairCodec {
 public:
  // REQUIRES (checked by the method): 0 <= eta < 0.5.
  XQuantPairCodec(std::unique_ptr<GridCodec> base, FollowerGrid follower, double eta);

  size_t dim() const override { return base_->dim(); }
  size_t block_tokens() const override { return base_->block_tokens(); }
  size_t leader_bytes(size_t n) const override { return base_->code_bytes(n); }
  size_t follower_bytes(size_t n) const override { return n / block_tokens() * grid_bytes(); }
  void encode(const float* leader, const float* follower, size_t n, uint8_t* leader_codes,
              uint8_t* follower_codes) const override;
  const Codec& view_codec() const override { return *base_; }
  const uint8_t* view(bool follower, const uint8_t* leader_codes, const uint8_t* follower_codes,
                      size_t n, std::vector<uint8_t>& scratch) const override;
  // The leader's: KIVI's checks. The follower's: every grid a finite step >= 0 and a finite minimum.
  void check_codes(bool follower, const uint8_t* codes, size_t n) const override;

  const GridCodec& base() const { return *base_; }

 private:
  size_t grid_bytes() const { return 4 * base_->grids(); }
  std::unique_ptr<GridCodec> base_;
  FollowerGrid follower_;
  double eta_;
};

// The paper's data-free calibration of a stored fp16 grid with `levels` = 2^bits - 1 steps,
// rounded back to fp16 (the step rounded up, so it stays >= 0 and covers the narrowed range).
void calibrate_grid(uint16_t& step, uint16_t& min, unsigned levels, double eta);

// The least-squares grid of a follower for one group of elements: x ~ min + step * code over the
// group's (code, x) pairs, summarized by their count and sums. The step is rounded to fp16 first
// and the minimum fitted to the rounded step; a negative step (values falling as codes rise)
// becomes 0, since KIVI's kernels take steps >= 0, as does a fit fp16 cannot hold. Writes the
// fp16 step and minimum.
void fit_follower_grid(double count, double sum_code, double sum_x, double sum_code2,
                       double sum_code_x, uint16_t& step, uint16_t& min);

}  // namespace veloxquant::xquant
