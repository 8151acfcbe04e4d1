// QJL keys (Zandieh, Daliri & Han, arXiv 2406.03482): the signs of a Gaussian JL projection S k
// (S: m x d, i.i.d. N(0, 1)) plus the key norm, stored in fp16 as the RMS over the channels
// (norm / sqrt(channels)), which stays in fp16 range for every key the cache accepts. The score with an unquantized query is the
// paper's unbiased estimator
//     q . k  ~  sqrt(pi/2) / m * ||k|| * <S q, sign(S k)>,
// computed straight from the bits. decode() returns the vector whose inner product with any q is
// that estimate, sqrt(pi/2) / m * ||k|| * S^T sign(S k), so reference and fused paths agree.
//
// Outlier channels (paper Section 4, reference code): in each group of `group` tokens the
// `outliers` channels with the largest norm over the group are split off; the inlier part gets the
// m-bit sketch and the outlier part its own `outlier_proj`-bit sketch (the first rows of S) and its
// own norm, so a few huge channels no longer inflate the variance of every score.
#pragma once

#include <cstdint>
#include <vector>

#include "veloxquant/codec.h"

namespace veloxquant {

struct QjlKeyConfig {
  size_t dim = 128;
  size_t proj = 256;          // m: sketch bits per token; multiple of 8
  size_t outliers = 8;        // outlier channels per token group; 0 disables the split
  size_t outlier_proj = 128;  // sketch bits of the outlier part; multiple of 8, <= proj
  size_t group = 32;          // tokens sharing one outlier-channel choice
  uint64_t seed = 0;
};

class QjlKeyCodec final : public Codec {
 public:
  // Throws SpecError when the configuration is inconsistent (names the value and the rule).
  explicit QjlKeyCodec(const QjlKeyConfig& config);
  // S (proj x dim, row-major, i.i.d. N(0, 1)) as the codec draws it from its seed: the CUDA
  // backend takes it from here so that both sketch with the same matrix.
  static std::vector<float> sketch_matrix(size_t dim, size_t proj, uint64_t seed);
  // The configuration in force (make() caps proj, outlier_proj and outliers by head_dim).
  const QjlKeyConfig& config() const { return cfg_; }

  size_t dim() const override { return cfg_.dim; }
  size_t block_tokens() const override { return block_; }
  size_t code_bytes(size_t n) const override;
  // The projection as held in memory: d x m floats.
  size_t state_bytes() const override { return proj_t_.size() * sizeof(float); }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses block headers encode() cannot write: outlier channels must increase and stay below
  // head_dim, since decode and score use them as indices.
  void check_codes(const uint8_t* codes, size_t n) const override;
  bool fused_score() const override { return true; }
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n,
             float* scores) const override;

 private:
  // Layout of one block of `block_` tokens: outlier channel indices (outliers x index_bytes_,
  // ascending), then per token: inlier sign bits (proj / 8 bytes), outlier sign bits
  // (outlier_proj / 8 bytes, only with outliers), inlier RMS (fp16), outlier RMS (fp16, only
  // with outliers).
  size_t header_bytes() const { return cfg_.outliers * index_bytes_; }
  size_t token_bytes() const;
  size_t block_bytes() const { return header_bytes() + block_ * token_bytes(); }
  size_t outlier_channel(const uint8_t* block, size_t j) const;  // j-th index of the header
  std::vector<uint32_t> read_outliers(const uint8_t* block) const;
  void encode_block(const float* x, uint8_t* block) const;

  QjlKeyConfig cfg_;
  size_t block_ = 1;        // tokens per block: `group` with outliers, 1 without
  size_t index_bytes_ = 1;  // bytes per outlier channel index (2 when dim > 256)
  bool split_ = false;      // outliers > 0
  std::vector<float> proj_t_;  // S transposed: row c is column c of S (m floats)
  std::vector<float> col_total_, col_total_out_;  // column sums of S over its first proj / outlier_proj rows
  float norm_in_ = 1, norm_out_ = 1;  // sqrt(channels) of each part: stored RMS -> norm
};

}  // namespace veloxquant
