#include "codecs/palu/palu_basis.h"

#include "core/principal_basis.h"
#include "core/rotation.h"

namespace veloxquant::palu {

void hadamard_blocks(float* x, size_t m) {
  size_t at = 0;
  for (size_t block = size_t{1} << 62; block > 1; block >>= 1) {
    if ((m - at) & block) {
      fwht(x + at, block);
      at += block;
    }
  }
}

std::vector<float> fit_basis(const float* x, size_t n, size_t heads, size_t first, size_t count,
                             size_t dim, size_t rank, size_t hi, bool hadamard) {
  const std::vector<double> directions = principal_directions(x + first * dim, n, heads * dim, count, dim, rank);
  std::vector<float> out(dim * rank);
  for (size_t j = 0; j < rank; ++j)
    for (size_t c = 0; c < dim; ++c) out[c * rank + j] = static_cast<float>(directions[j * dim + c]);
  // Row c holds channel c's weight in every latent: rotating the latents of a part by H
  // (symmetric) multiplies the part's segment of every row by H.
  for (size_t c = 0; hadamard && c < dim; ++c) {
    hadamard_blocks(out.data() + c * rank, hi);
    hadamard_blocks(out.data() + c * rank + hi, rank - hi);
  }
  return out;
}

}  // namespace veloxquant::palu
