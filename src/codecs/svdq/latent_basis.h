// SVDq's per-stream state: the leading right singular vectors of one KV head's keys (fitted to the
// prompt), stored as fp16, and what encode, decode and score derive from them.
//
// State layout, `rank` vectors of head_dim fp16 each, leading (largest singular value) first:
//   fp16 v[j][i]   element i of basis vector j at byte 2 (j dim + i)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/latent_frame.h"

namespace veloxquant::svdq {

// The state of one stream: principal_directions() (core/principal_basis.h) of the n keys at
// x[t * stride .. t * stride + dim), the `rank` leading right singular vectors, in fp16. Latents
// are stored divided by latent_scale(dim), so KIVI's fp16 minimum and step over them cannot
// overflow.
std::vector<uint8_t> fit_basis_state(const float* x, size_t n, size_t stride, size_t dim,
                                     size_t rank);

struct LatentBasis {
  size_t dim = 0, rank = 0;
  // [rank][dim]: c v_j, the stored vectors times latent_scale(dim). decode: x = sum_j y_j up_j;
  // score: q . x = sum_j (q . up_j) y_j.
  std::vector<float> up;
  // [rank][dim]: the dual basis over c, V (V^T V)^-1 / c, so y_j = x . down_j. The fp16 vectors
  // are orthonormal only to fp16 precision; projecting with their dual makes decode(encode(x))
  // the exact orthogonal projection of x on their span (before quantization).
  std::vector<float> down;
  // The up vectors completed to a basis, where a key is its latents then zeros (prefill).
  LatentFrame frame;
};

// Reads a state fit_basis_state() wrote for `head`; throws Error naming the head and what is
// wrong when its size is not 2 dim rank bytes, an element is not finite, or the vectors are not
// orthonormal within fp16 precision (a damaged session file).
LatentBasis read_basis_state(const std::vector<uint8_t>& state, size_t dim, size_t rank,
                             size_t head);

}  // namespace veloxquant::svdq
