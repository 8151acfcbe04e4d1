// GEAR (Kang et al., arXiv 2403.05527): an ultra-low-bit base quantization, a low-rank
// approximation of its residual and a sparse correction of the largest residual entries, per
// block of `block` tokens: decode = Q + L + S.
//
// Block of n tokens, head_dim d, b bits, rank r, k sparse entries (k = round(sparsity * n * d)):
//   fp16 scale[m], fp16 min[m]       base grids: m = d for keys (per channel over the block's
//                                    tokens), m = n for values (per token over its channels);
//                                    the grid of common/affine_grid.h
//   codes                            n * d codes of b bits, one little-endian bit stream
//                                    (core/bitpack.h), token-major
//   fp16 A[n][r], fp16 B[r][d]       low-rank factors of the residual (U sqrt(S), sqrt(S) V^T)
//   idx[k]                           sparse positions t * d + c, strictly increasing; uint16 when
//                                    n * d <= 65536, else uint32
//   fp16 val[k]                      sparse corrections: X - (Q + L) at those positions
// Nothing is shared between blocks: state_bytes() is 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "veloxquant/codec.h"

namespace veloxquant::gear {

enum class Axis { PerChannel, PerToken };  // keys, values

struct GearConfig {
  unsigned bits = 2;
  size_t rank = 4;
  double sparsity = 0.02;
  size_t block = 64;
};

// Sparse entries per block of `total` elements: round(sparsity * total), at most total.
size_t sparse_entries(double sparsity, size_t total);

class GearCodec final : public Codec {
 public:
  // REQUIRES (checked by the method): bits in {2, 4}, block >= 1, dim >= 1,
  // 0 <= sparsity <= 1. The stored rank is min(rank, block, dim).
  GearCodec(size_t dim, Axis axis, const GearConfig& cfg);

  size_t dim() const override { return dim_; }
  size_t block_tokens() const override { return n_; }
  size_t code_bytes(size_t n) const override { return n / n_ * block_bytes_; }
  size_t state_bytes() const override { return 0; }
  void encode(const float* x, size_t n, uint8_t* codes) const override;
  void decode(const uint8_t* codes, size_t n, float* x) const override;
  // Refuses what encode() cannot write: a non-finite or negative stored step, a non-finite
  // minimum, a non-finite low-rank factor, a sparse index out of range or not strictly
  // increasing, a non-finite sparse value.
  void check_codes(const uint8_t* codes, size_t n) const override;

  // Attention on the three parts without rebuilding a block: the codes against the query folded
  // with the grids, the low-rank part through B q (r values per query; accumulating, the
  // weighted sum of A's rows times B) and the sparse entries one by one. Rebuilding costs r
  // multiply-adds per element; this costs r per token and per channel.
  bool fused_score() const override { return true; }
  bool fused_accumulate() const override { return true; }
  void score(const float* q, size_t nq, const uint8_t* codes, size_t n, float* scores) const override;
  void accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n, float* out) const override;

  // The layout, for tests and docs.
  size_t rank() const { return r_; }
  size_t sparse_count() const { return k_; }
  size_t index_bytes() const { return ib_; }
  size_t grid_count() const { return m_; }
  size_t block_bytes() const { return block_bytes_; }
  // Byte offsets inside a block.
  size_t codes_offset() const { return 4 * m_; }
  size_t factors_offset() const { return codes_offset() + code_bits_bytes_; }
  size_t index_offset() const { return factors_offset() + 2 * r_ * (n_ + dim_); }
  size_t values_offset() const { return index_offset() + ib_ * k_; }

 private:
  // One block's parts in f32: grids [m], codes [n][d], A [n][r], B [r][d], sparse entries.
  struct Parts {
    std::vector<float> scale, mins, codes, a, b, sparse_values;
    std::vector<uint32_t> sparse_at;
  };
  void read_parts(const uint8_t* in, Parts& p) const;
  void decode_block(const uint8_t* in, float* x) const;
  size_t dim_, n_, m_, r_, k_, ib_, code_bits_bytes_, block_bytes_;
  unsigned bits_;
  Axis axis_;
};

}  // namespace veloxquant::gear
