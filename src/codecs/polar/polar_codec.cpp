#include "codecs/polar/polar_codec.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "codecs/polar/angle_codebooks.h"
#include "codecs/polar/polar_transform.h"
#include "core/bitpack.h"
#include "core/simd.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant {
namespace {

// Chunk of tokens reconstructed at a time by score() / accumulate().
constexpr size_t kChunk = 256;

}  // namespace

PolarCodec::PolarCodec(const PolarConfig& config) : cfg_(config) {
  const std::string levels = std::to_string(cfg_.levels);
  if (cfg_.levels < 1 || cfg_.levels > 16) {
    throw SpecError("polar: levels=" + levels + "; expected 1..16");
  }
  block_ = size_t{1} << cfg_.levels;
  if (cfg_.dim % block_ != 0) {
    throw SpecError("polar: head_dim " + std::to_string(cfg_.dim) + " is not a multiple of 2^levels = " +
                    std::to_string(block_) + " (levels=" + levels +
                    "); expected head_dim divisible by 2^levels");
  }
  for (unsigned b : {cfg_.level1_bits, cfg_.bits}) {
    if (b < 1 || b > 8) throw SpecError("polar: angle bits " + std::to_string(b) + "; expected 1..8");
  }
  blocks_ = cfg_.dim / block_;
  size_t offset = 0;
  for (size_t l = 1; l <= cfg_.levels; ++l) {
    Level lv;
    lv.bits = l == 1 ? cfg_.level1_bits : cfg_.bits;
    lv.angles = blocks_ * polar::angles_at_level(cfg_.levels, l);
    lv.byte_offset = offset;
    offset += packed_bytes(lv.angles, lv.bits);
    lv.codebook = &polar::angle_codebook(l, lv.bits);
    for (float c : lv.codebook->centroids) {
      lv.cosines.push_back(std::cos(c));
      lv.sines.push_back(std::sin(c));
    }
    levels_.push_back(std::move(lv));
  }
  radius_offset_ = offset;
  sqrt_dim_ = std::sqrt(static_cast<float>(cfg_.dim));
  inv_sqrt_dim_ = 1.0f / sqrt_dim_;
  token_bytes_ = offset + 2 * blocks_;
  rotation_ = Rotation(cfg_.dim, cfg_.seed);
}

size_t PolarCodec::state_bytes() const {
  size_t floats = 0;
  for (const Level& lv : levels_)
    floats += lv.codebook->centroids.size() + lv.codebook->boundaries.size() + lv.cosines.size() +
              lv.sines.size();
  return rotation_.state_bytes() + floats * sizeof(float);
}

void PolarCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  const size_t d = cfg_.dim, per_block = block_ - 1;
  std::vector<float> y(d), angles(per_block);
  std::vector<std::vector<uint8_t>> level_codes(levels_.size());
  for (size_t l = 0; l < levels_.size(); ++l) level_codes[l].resize(levels_[l].angles);
  for (size_t t = 0; t < n; ++t) {
    std::copy_n(x + t * d, d, y.data());
    rotation_.forward(y.data());
    uint8_t* rec = codes + t * token_bytes_;
    for (size_t b = 0; b < blocks_; ++b) {
      // Stored as radius / sqrt(dim): a rotated block's radius is at most the vector's norm, at most
      // sqrt(dim) times its largest element, which the cache keeps within fp16 range.
      const float radius = polar::forward(y.data() + b * block_, cfg_.levels, angles.data());
      const uint16_t h = f32_to_f16(radius * inv_sqrt_dim_);
      rec[radius_offset_ + 2 * b] = static_cast<uint8_t>(h);
      rec[radius_offset_ + 2 * b + 1] = static_cast<uint8_t>(h >> 8);
      size_t a = 0;
      for (size_t l = 0; l < levels_.size(); ++l) {
        const size_t per = polar::angles_at_level(cfg_.levels, l + 1);
        for (size_t j = 0; j < per; ++j, ++a)
          level_codes[l][b * per + j] = levels_[l].codebook->quantize(angles[a]);
      }
    }
    for (size_t l = 0; l < levels_.size(); ++l)
      pack_bits(level_codes[l].data(), levels_[l].angles, levels_[l].bits, rec + levels_[l].byte_offset);
  }
}

void PolarCodec::decode_rotated(const uint8_t* codes, size_t n, float* y) const {
  const size_t d = cfg_.dim, per_block = block_ - 1;
  std::vector<float> cosines(per_block), sines(per_block);
  std::vector<std::vector<uint8_t>> level_codes(levels_.size());
  for (size_t l = 0; l < levels_.size(); ++l) level_codes[l].resize(levels_[l].angles);
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* rec = codes + t * token_bytes_;
    for (size_t l = 0; l < levels_.size(); ++l)
      unpack_bits(rec + levels_[l].byte_offset, levels_[l].angles, levels_[l].bits, level_codes[l].data());
    for (size_t b = 0; b < blocks_; ++b) {
      size_t a = 0;
      for (size_t l = 0; l < levels_.size(); ++l) {
        const size_t per = polar::angles_at_level(cfg_.levels, l + 1);
        for (size_t j = 0; j < per; ++j, ++a) {
          const uint8_t c = level_codes[l][b * per + j];
          cosines[a] = levels_[l].cosines[c];
          sines[a] = levels_[l].sines[c];
        }
      }
      const uint16_t h = static_cast<uint16_t>(rec[radius_offset_ + 2 * b] | (rec[radius_offset_ + 2 * b + 1] << 8));
      polar::inverse(f16_to_f32(h) * sqrt_dim_, cosines.data(), sines.data(), cfg_.levels, y + t * d + b * block_);
    }
  }
}

void PolarCodec::decode(const uint8_t* codes, size_t n, float* x) const {
  decode_rotated(codes, n, x);
  rotation_.inverse(x, n);
}

void PolarCodec::score(const float* q, size_t nq, const uint8_t* codes, size_t n,
                       float* scores) const {
  // q . k = (R q) . (R k): rotate the queries once instead of every key back.
  const size_t d = cfg_.dim;
  std::vector<float> rq(q, q + nq * d), y(kChunk * d), s(nq * kChunk);
  rotation_.forward(rq.data(), nq);
  for (size_t t0 = 0; t0 < n; t0 += kChunk) {
    const size_t m = std::min(kChunk, n - t0);
    decode_rotated(codes + code_bytes(t0), m, y.data());
    simd::dot_f32_rows(rq.data(), nq, y.data(), m, d, s.data());
    for (size_t i = 0; i < nq; ++i) std::copy_n(s.data() + i * m, m, scores + i * n + t0);
  }
}

void PolarCodec::accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                            float* out) const {
  // sum_t w_t R^T y_t = R^T sum_t w_t y_t: accumulate in the rotated frame, rotate back once.
  const size_t d = cfg_.dim;
  std::vector<float> acc(nq * d, 0.0f), y(kChunk * d), wc(nq * kChunk);
  for (size_t t0 = 0; t0 < n; t0 += kChunk) {
    const size_t m = std::min(kChunk, n - t0);
    decode_rotated(codes + code_bytes(t0), m, y.data());
    for (size_t i = 0; i < nq; ++i) std::copy_n(w + i * n + t0, m, wc.data() + i * m);
    simd::accumulate_f32_rows(wc.data(), nq, y.data(), m, d, acc.data());
  }
  rotation_.inverse(acc.data(), nq);
  for (size_t i = 0; i < nq * d; ++i) out[i] += acc[i];
}

}  // namespace veloxquant
