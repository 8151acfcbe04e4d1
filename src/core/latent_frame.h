// A basis of R^dim that starts with the vectors a low-rank method stores its latents on (palu,
// svdq), completed by an orthonormal complement: G = [b_0 .. b_{r-1} c_0 .. c_{dim-r-1}] as
// columns. A latent vector y decodes to x = B y, which in this frame is [y, 0]: prefill attends
// there, mapping its queries and outputs once per row instead of multiplying every stored latent
// by B (Codec::decodes_in_basis).
//
// The stored b_j are orthonormal only to fp16 rounding (or scaled), so G is not orthogonal and
// vectors and queries map differently: to_frame(x) = G^-1 x, queries_to_frame(q) = G^T q (their
// products are q . x), from_frame(y) = G y. Since the c_k are orthonormal and orthogonal to every
// b_j, G^-1 x = [(B^T B)^-1 B^T x, C^T x]: one d x d product and one r x r.
#pragma once

#include <cstddef>
#include <vector>

namespace veloxquant {

class LatentFrame {
 public:
  LatentFrame() = default;
  // b: [rank][dim], vector j at b + j * dim. REQUIRES: 1 <= rank <= dim, the b_j linearly
  // independent (the methods check their stored bases are orthonormal to fp16 rounding).
  LatentFrame(const float* b, size_t dim, size_t rank);

  bool empty() const { return rows_.empty(); }
  // Each in place on n rows [n][dim].
  void to_frame(float* x, size_t n) const;
  void queries_to_frame(float* x, size_t n) const;
  void from_frame(float* x, size_t n) const;

 private:
  size_t dim_ = 0, rank_ = 0;
  std::vector<float> rows_;      // [dim][dim]: the b_j, then the c_k (G^T)
  std::vector<float> gram_inv_;  // [rank][rank]: (B^T B)^-1
};

}  // namespace veloxquant
