// Sums of float vectors over the positions where a bit string has a 1 (bit i of byte i / 8,
// least significant first): the inner loop of QJL's fused score. With u's total T, the inner
// product of u with the ±1 vector of the bits is 2 * masked_sum - T.
#pragma once

#include <cstddef>
#include <cstdint>

namespace veloxquant::qjl {

// n records `row_stride` bytes apart from `rows`, each holding m bits (a) and then mb bits (b).
// For up to four vector pairs u_j = u + j * stride (m floats), v_j = v + j * stride (mb floats):
//   out[j * n + t] = wa[t] * (sum of u_j over the set bits of a_t)
//                  + wb[t] * (sum of v_j over the set bits of b_t).
// mb = 0 drops the second term (v and wb unused). Every loaded vector of u or v serves several
// records, and every loaded group of bits all vectors.
// REQUIRES: 1 <= nu <= 4, m % 8 == 0, mb % 8 == 0.
struct SignRows {
  const uint8_t* rows;
  size_t row_stride, n, m, mb;
  const float* wa;
  const float* wb;
};
void weighted_masked_sums(const SignRows& r, const float* u, const float* v, size_t nu,
                          size_t stride, float* out);

// For nq queries i: v_i = sum_j a[i * n + j] * col[j] and u_i = s_i - v_i (rows of m floats in
// v, u, s): the outlier part of each sketched query and the rest, all n columns summed in
// registers in one pass over v and u.
void outlier_sketch(const float* const* col, const float* a, size_t n, size_t nq, const float* s,
                    size_t m, float* v, float* u);

}  // namespace veloxquant::qjl
