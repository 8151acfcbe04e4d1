// Sums of float vectors over the positions where a bit string has a 1 (bit i of byte i / 8,
// least significant first): the inner loop of QJL's fused score. With u's total T, the inner
// product of u with the ±1 vector of the bits is 2 * masked_sum - T.
#pragma once

#include <cstddef>
#include <cstdint>

namespace veloxquant::qjl {

// out[j] = sum over i < m with bit i set of u[j * stride + i], for j < nu: up to four vectors
// share each loaded group of bits.
// REQUIRES: 1 <= nu <= 4, m % 8 == 0 (bits holds m / 8 bytes).
void masked_sums(const float* u, size_t nu, size_t stride, const uint8_t* bits, size_t m,
                 float* out);

}  // namespace veloxquant::qjl
