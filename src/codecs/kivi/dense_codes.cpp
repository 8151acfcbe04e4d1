#include "codecs/kivi/dense_codes.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/bitpack.h"
#include "core/simd.h"
#include "veloxquant/tensor.h"

namespace veloxquant::kivi {
namespace {

// fp16 at byte offset 2 * i of p (no alignment assumed).
float half_at(const uint8_t* p, size_t i) {
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return f16_to_f32(h);
}

// Code i of a dense bit stream, read on its own (the references' way).
unsigned code_at(const uint8_t* stream, size_t i, unsigned bits) {
  const size_t bit = i * bits;
  return (stream[bit / 8] >> (bit % 8)) & ((1u << bits) - 1u);
}

}  // namespace

void score_dense_keys(const uint8_t* blocks, size_t count, size_t block_bytes, size_t dim,
                      unsigned bits, size_t group, const float* q, size_t nq, float* scores,
                      size_t ld) {
  std::vector<float> scale(dim), mins(dim), codes(group * dim), folded(nq * dim), offset(nq),
      sums(nq * group);
  for (size_t b = 0; b < count; ++b) {
    const uint8_t* block = blocks + b * block_bytes;
    for (size_t c = 0; c < dim; ++c) scale[c] = half_at(block, c), mins[c] = half_at(block, dim + c);
    unpack_bits_f32(block + 4 * dim, group * dim, bits, codes.data());
    for (size_t j = 0; j < nq; ++j) {
      const float* qj = q + j * dim;
      for (size_t c = 0; c < dim; ++c) folded[j * dim + c] = qj[c] * scale[c];
      offset[j] = simd::dot(qj, mins.data(), dim);
    }
    simd::dot_f32_rows(folded.data(), nq, codes.data(), group, dim, sums.data());
    for (size_t j = 0; j < nq; ++j)
      for (size_t t = 0; t < group; ++t) scores[j * ld + b * group + t] = sums[j * group + t] + offset[j];
  }
}

void score_dense_keys_reference(const uint8_t* blocks, size_t count, size_t block_bytes,
                                size_t dim, unsigned bits, size_t group, const float* q, size_t nq,
                                float* scores, size_t ld) {
  for (size_t b = 0; b < count; ++b) {
    const uint8_t* block = blocks + b * block_bytes;
    for (size_t j = 0; j < nq; ++j)
      for (size_t t = 0; t < group; ++t) {
        double s = 0;
        for (size_t c = 0; c < dim; ++c) {
          const double k = double(half_at(block, dim + c)) +
                           double(half_at(block, c)) * code_at(block + 4 * dim, t * dim + c, bits);
          s += double(q[j * dim + c]) * k;
        }
        scores[j * ld + b * group + t] = static_cast<float>(s);
      }
  }
}

void accumulate_dense_values(const uint8_t* blocks, size_t count, size_t block_bytes, size_t dim,
                             unsigned bits, size_t group, const float* w, size_t ldw, size_t nq,
                             float* out) {
  const size_t groups = (dim + group - 1) / group, quad_bytes = 4 * dim * bits / 8;
  std::vector<float> codes(4 * dim), params(8 * groups), offset(nq * groups, 0.0f);
  for (size_t b = 0; b < count; ++b) {
    const uint8_t* block = blocks + b * block_bytes;
    unpack_bits_f32(block, 4 * dim, bits, codes.data());
    for (size_t k = 0; k < 8 * groups; ++k) params[k] = half_at(block + quad_bytes, k);
    const float* scale = params.data();
    const float* mins = params.data() + 4 * groups;
    for (size_t j = 0; j < nq; ++j) {
      float* o = out + j * dim;
      for (size_t i = 0; i < 4; ++i) {
        const float wt = w[j * ldw + b * 4 + i];
        const float* x = codes.data() + i * dim;
        for (size_t g = 0; g < groups; ++g) {
          const float a = wt * scale[g * 4 + i];
          const size_t end = std::min(dim, (g + 1) * group);
          for (size_t c = g * group; c < end; ++c) o[c] += a * x[c];
          offset[j * groups + g] += wt * mins[g * 4 + i];
        }
      }
    }
  }
  for (size_t j = 0; j < nq; ++j)
    for (size_t c = 0; c < dim; ++c) out[j * dim + c] += offset[j * groups + c / group];
}

void accumulate_dense_values_reference(const uint8_t* blocks, size_t count, size_t block_bytes,
                                       size_t dim, unsigned bits, size_t group, const float* w,
                                       size_t ldw, size_t nq, float* out) {
  const size_t groups = (dim + group - 1) / group, quad_bytes = 4 * dim * bits / 8;
  for (size_t j = 0; j < nq; ++j)
    for (size_t c = 0; c < dim; ++c) {
      const size_t g = c / group;
      double s = 0;
      for (size_t b = 0; b < count; ++b) {
        const uint8_t* block = blocks + b * block_bytes;
        for (size_t i = 0; i < 4; ++i) {
          const double v = double(half_at(block + quad_bytes, 4 * groups + g * 4 + i)) +
                           double(half_at(block + quad_bytes, g * 4 + i)) * code_at(block, i * dim + c, bits);
          s += double(w[j * ldw + b * 4 + i]) * v;
        }
      }
      out[j * dim + c] += static_cast<float>(s);
    }
}

}  // namespace veloxquant::kivi
