// Activations rounded to int8 for the integer weight products exactly as llama.cpp's CPU backend
// rounds them to the Q8 blocks of the weight type's vec_dot_type: per block of 32 values (Q8_0,
// Q8_1) or 256 (Q8_K) of a token, codes round(x * 127 / max |x|) (to nearest, ties to even) and a
// scale d, max |x| / 127 kept in fp16 for Q8_0 / Q8_1 and 1 / (127 / max |x|) in f32 for Q8_K; Q8_1
// also keeps d times the block's code sum in fp16. The same codes and scales make the products
// follow llama.cpp's rounding, not just its precision. The products then compute, per group g of
// a row (the weight type's scale group, 16 or 32 elements, inside one activation block),
//     sum_k w_k x_k  ~=  d_g * (scale_g * sum_k (code_k - c) q_k + offset_g * sum_k q_k)
// with the integer sums exact (block_codes.h has the weights' side): rounding the activations is
// the only approximation beyond f32 rounding, at most d_g / 2 per element plus, for fp16 scales,
// 127 |d_g - d| from rounding the scale.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace veloxquant::runtime {

// Tokens are padded with zero tokens to a multiple of kActivationTokenPad, and each token's codes
// with zeros to a multiple of kActivationUnit, so that kernels may run whole tiles past the end.
inline constexpr size_t kActivationTokenPad = 8;
inline constexpr size_t kActivationUnit = 256;

// How codes and per-group values lie in memory. kRows: token after token, with quad_start, for
// the few-token kernels. kTiles: by tiles of kActivationTokenPad tokens, the tile's 4 codes of one
// quad side by side (32 bytes) and its values of one group side by side, for the panel kernels:
// one pointer per tile and constant offsets from it.
enum class ActivationLayout { kRows, kTiles };

// llama.cpp's activation block of a weight type: how many values share a scale, and whether the
// scale and scaled sums are stored in fp16.
struct ActivationRounding {
  size_t block = 32;       // 32 (Q8_0, Q8_1) or 256 (Q8_K)
  bool half_scale = true;  // fp16 scales and scaled sums (Q8_0, Q8_1) or f32 (Q8_K)
};
inline constexpr ActivationRounding kQ8Blocks{32, true};
inline constexpr ActivationRounding kQ8KBlocks{256, false};

struct QuantizedActivations {
  ActivationLayout layout = ActivationLayout::kRows;
  size_t tokens = 0;  // padded token count
  size_t stride = 0;  // codes per token: cols rounded up to kActivationUnit
  size_t group = 0;
  int code_offset = 0;  // the weight type's c, folded into the starting sums below

  std::vector<int8_t> codes;         // tokens x stride
  std::vector<int32_t> quad_start;   // kRows: [tokens][stride / 4]: -c * (sum of codes 4j .. 4j + 3)
  std::vector<float> scale;          // tokens x groups() + padding: d
  std::vector<float> scaled_sum;     // tokens x groups() + padding: d * sum of the group's codes
  std::vector<int32_t> group_start;  // tokens x groups(): -c * sum of the group's codes

  size_t groups() const { return stride / group; }
  // Where code k and group g of token t lie in codes and in the per-group vectors.
  size_t code_index(size_t t, size_t k) const {
    if (layout == ActivationLayout::kRows) return t * stride + k;
    constexpr size_t kTile = kActivationTokenPad;
    return ((t / kTile * (stride / 4) + k / 4) * kTile + t % kTile) * 4 + k % 4;
  }
  size_t group_index(size_t t, size_t g) const {
    if (layout == ActivationLayout::kRows) return t * groups() + g;
    return (t / kActivationTokenPad * groups() + g) * kActivationTokenPad + t % kActivationTokenPad;
  }
  // kRows: token t's codes, quad starts and per-group values.
  const int8_t* codes_of(size_t t) const { return codes.data() + code_index(t, 0); }
  const int32_t* quad_start_of(size_t t) const { return quad_start.data() + t * (stride / 4); }
  const float* scale_of(size_t t) const { return scale.data() + group_index(t, 0); }
  const float* scaled_sum_of(size_t t) const { return scaled_sum.data() + group_index(t, 0); }
  const int32_t* group_start_of(size_t t) const { return group_start.data() + group_index(t, 0); }
};

// Quantizes n tokens of `cols` floats (x[t * cols + k]) into out in `layout`, reusing its storage:
// codes and scales per rounding.block values, stored per group of `group`.
// REQUIRES: cols a multiple of rounding.block; group 16 or 32; rounding.block 32 or 256.
void quantize_activations(const float* x, size_t n, size_t cols, size_t group, int code_offset,
                          ActivationRounding rounding, ActivationLayout layout, QuantizedActivations& out);

}  // namespace veloxquant::runtime
