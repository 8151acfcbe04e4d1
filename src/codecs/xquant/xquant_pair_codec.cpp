#include "codecs/xquant/xquant_pair_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "codecs/common/affine_grid.h"
#include "veloxquant/tensor.h"

namespace veloxquant::xquant {

XQuantPairCodec::XQuantPairCodec(std::unique_ptr<GridCodec> base, FollowerGrid follower, double eta)
    : base_(std::move(base)), follower_(follower), eta_(eta) {}

void calibrate_grid(uint16_t& step, uint16_t& min, unsigned levels, double eta) {
  if (eta == 0) return;
  const double s = f16_to_f32(step), m = f16_to_f32(min);
  min = f32_to_f16(static_cast<float>(m + eta * s * levels));
  step = f32_to_f16(static_cast<float>((1 - 2 * eta) * s));
  if (f16_to_f32(step) < (1 - 2 * eta) * s) step = static_cast<uint16_t>(step + 1);
}

void fit_follower_grid(double count, double sum_code, double sum_x, double sum_code2,
                       double sum_code_x, uint16_t& step, uint16_t& min) {
  const double mean_code = sum_code / count, mean_x = sum_x / count;
  const double var = sum_code2 - sum_code * mean_code, cov = sum_code_x - sum_code * mean_x;
  const double fitted = var > 0 && cov > 0 ? cov / var : 0.0;
  step = f32_to_f16(static_cast<float>(fitted));
  min = f32_to_f16(static_cast<float>(mean_x - f16_to_f32(step) * mean_code));
  if (!std::isfinite(f16_to_f32(step)) || !std::isfinite(f16_to_f32(min))) {
    step = 0;  // the mean alone, which lies within the group's (fp16) values
    min = f32_to_f16(static_cast<float>(mean_x));
  }
}

void XQuantPairCodec::encode(const float* leader, const float* follower, size_t n,
                             uint8_t* leader_codes, uint8_t* follower_codes) const {
  base_->encode(leader, n, leader_codes);
  const size_t b = block_tokens(), d = dim(), grids = base_->grids();
  const unsigned levels = (1u << base_->bits()) - 1u;
  std::vector<uint8_t> codes(b * d);
  std::vector<uint16_t> halves(2 * grids);
  std::vector<double> count(grids), sq(grids), sx(grids), sqq(grids), sqx(grids);
  std::vector<float> lo(grids), hi(grids);
  for (size_t block = 0; block < n / b; ++block) {
    uint8_t* lead = leader_codes + block * base_->block_bytes();
    // The leader's grids, calibrated in place: its codes were chosen on KIVI's grid.
    std::memcpy(halves.data(), lead + base_->grids_at(), grid_bytes());
    for (size_t g = 0; g < grids; ++g) calibrate_grid(halves[g], halves[grids + g], levels, eta_);
    std::memcpy(lead + base_->grids_at(), halves.data(), grid_bytes());

    base_->unpack_codes(lead, codes.data());
    std::fill(count.begin(), count.end(), 0.0);
    std::fill(sq.begin(), sq.end(), 0.0);
    std::fill(sx.begin(), sx.end(), 0.0);
    std::fill(sqq.begin(), sqq.end(), 0.0);
    std::fill(sqx.begin(), sqx.end(), 0.0);
    const float* x = follower + block * b * d;
    for (size_t t = 0; t < b; ++t) {
      for (size_t c = 0; c < d; ++c) {
        const size_t g = base_->grid_of(t, c);
        const double q = codes[t * d + c], v = x[t * d + c];
        lo[g] = count[g] == 0 ? x[t * d + c] : std::min(lo[g], x[t * d + c]);
        hi[g] = count[g] == 0 ? x[t * d + c] : std::max(hi[g], x[t * d + c]);
        count[g] += 1;
        sq[g] += q;
        sx[g] += v;
        sqq[g] += q * q;
        sqx[g] += q * v;
      }
    }
    for (size_t g = 0; g < grids; ++g) {
      if (follower_ == FollowerGrid::LeastSquares) {
        fit_follower_grid(count[g], sq[g], sx[g], sqq[g], sqx[g], halves[g], halves[grids + g]);
        continue;
      }
      const AffineGrid grid = AffineGrid::fit(lo[g], hi[g], base_->bits());
      halves[g] = grid.scale_f16;
      halves[grids + g] = grid.min_f16;
      calibrate_grid(halves[g], halves[grids + g], levels, eta_);
    }
    std::memcpy(follower_codes + block * grid_bytes(), halves.data(), grid_bytes());
  }
}

const uint8_t* XQuantPairCodec::view(bool follower, const uint8_t* leader_codes,
                                     const uint8_t* follower_codes, size_t n,
                                     std::vector<uint8_t>& scratch) const {
  if (!follower) return leader_codes;
  const size_t blocks = n / block_tokens(), bytes = base_->block_bytes();
  scratch.resize(blocks * bytes);
  for (size_t block = 0; block < blocks; ++block) {
    uint8_t* out = scratch.data() + block * bytes;
    std::memcpy(out, leader_codes + block * bytes, bytes);
    std::memcpy(out + base_->grids_at(), follower_codes + block * grid_bytes(), grid_bytes());
  }
  return scratch.data();
}

void XQuantPairCodec::check_codes(bool follower, const uint8_t* codes, size_t n) const {
  if (!follower) return base_->check_codes(codes, n);
  const size_t grids = base_->grids();
  for (size_t block = 0; block < n / block_tokens(); ++block) {
    std::vector<uint16_t> halves(2 * grids);
    std::memcpy(halves.data(), codes + block * grid_bytes(), grid_bytes());
    check_stored_grids(halves.data(), halves.data() + grids, grids, "follower grid", block);
  }
}

}  // namespace veloxquant::xquant
