#include "codecs/turboquant/rotated_table_codec.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/bitpack.h"
#include "veloxquant/error.h"

namespace veloxquant::turboquant {

float rotate_to_unit(const Rotation& rotation, const float* x, float* y) {
  const size_t d = rotation.dim();
  double sum = 0;
  for (size_t c = 0; c < d; ++c) sum += static_cast<double>(x[c]) * x[c];
  const float norm = static_cast<float>(std::sqrt(sum));
  if (norm == 0) {
    std::fill(y, y + d, 0.0f);
    return 0;
  }
  std::copy(x, x + d, y);
  rotation.forward(y);
  const float inv = 1.0f / norm;
  for (size_t c = 0; c < d; ++c) y[c] *= inv;
  return norm;
}

RotatedTableCodec::RotatedTableCodec(size_t dim, unsigned code_bits, std::vector<float> table,
                                     uint64_t rotation_seed, size_t codebook_bytes)
    : dim_(dim), code_bits_(code_bits), table_(table), rotation_(dim, rotation_seed),
      codebook_bytes_(codebook_bytes),
      format_{sizeof(float) + packed_bytes(dim, code_bits), 0, sizeof(float)},
      kernel_(dim, code_bits, std::move(table)) {}

void RotatedTableCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  std::vector<float> y(dim_);
  std::vector<uint8_t> idx(dim_);
  for (size_t t = 0; t < n; ++t) {
    const float norm = rotate_to_unit(rotation_, x + t * dim_, y.data());
    choose_codes(y.data(), idx.data());
    uint8_t* rec = codes + t * format_.stride;
    std::memcpy(rec + format_.scale_offset, &norm, sizeof norm);
    pack_bits(idx.data(), dim_, code_bits_, rec + format_.code_offset);
  }
}

void RotatedTableCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t t = 0; t < n; ++t) {
    float norm;
    std::memcpy(&norm, codes + t * format_.stride + format_.scale_offset, sizeof norm);
    if (!(norm >= 0) || !std::isfinite(norm)) {
      throw Error(fmt::format("turboquant: corrupt codes: token {} stores norm {}; expected a "
                              "finite norm >= 0", t, norm));
    }
  }
}

void RotatedTableCodec::decode_in_basis(const uint8_t* codes, size_t n, float* y) const {
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* rec = codes + t * format_.stride;
    float norm;
    std::memcpy(&norm, rec + format_.scale_offset, sizeof norm);
    unpack_table_f32(rec + format_.code_offset, dim_, code_bits_, table_.data(), norm, y + t * dim_);
  }
}

void RotatedTableCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  decode_in_basis(codes, n, x);
  rotation_.inverse(x, n);
}

// q . x_t = ||x_t|| (R q) . table[codes_t]: the queries are rotated once for all tokens.
void RotatedTableCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n,
                              float* scores) const {
  const size_t P = kernel_.positions();
  std::vector<float> rotated(q, q + nq * dim_), qk(nq * P);
  rotation_.forward(rotated.data(), nq);
  for (size_t i = 0; i < nq; ++i) kernel_.to_kernel_order(rotated.data() + i * dim_, qk.data() + i * P);
  kernel_.dot(qk.data(), nq, codes, n, format_, 1.0f, scores);
}

// sum_t w_t x_t = R^T (sum_t w_t ||x_t|| table[codes_t]): one inverse rotation per query row.
void RotatedTableCodec::accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                                   float* out) const {
  const size_t P = kernel_.positions();
  std::vector<float> acck(nq * P, 0.0f), sums(nq * dim_, 0.0f);
  kernel_.accumulate(w, nq, codes, n, format_, 1.0f, acck.data());
  for (size_t i = 0; i < nq; ++i) kernel_.add_natural_order(acck.data() + i * P, sums.data() + i * dim_);
  rotation_.inverse(sums.data(), nq);
  for (size_t i = 0; i < nq * dim_; ++i) out[i] += sums[i];
}

}  // namespace veloxquant::turboquant
