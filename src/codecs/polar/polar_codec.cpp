#include "codecs/polar/polar_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "codecs/polar/angle_codebooks.h"
#include "codecs/polar/polar_transform.h"
#include "core/bitpack.h"
#include "core/simd.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace veloxquant {
namespace {

// Chunk of tokens reconstructed at a time by score() / accumulate().
constexpr size_t kChunk = 256;

// The n codes of one level, `bits` each, at bit `bit` of a record, in pack_bits' little-endian
// layout. A level starting mid-byte ORs its codes in, so the record's code bytes must start zeroed.
void put_codes(const uint8_t* codes, size_t n, unsigned bits, uint8_t* rec, size_t bit) {
  if (bit % 8 == 0) return pack_bits(codes, n, bits, rec + bit / 8);
  for (size_t i = 0; i < n; ++i, bit += bits) {
    const unsigned v = static_cast<unsigned>(codes[i]) << (bit % 8);
    rec[bit / 8] = static_cast<uint8_t>(rec[bit / 8] | v);
    if (bit % 8 + bits > 8) rec[bit / 8 + 1] = static_cast<uint8_t>(rec[bit / 8 + 1] | (v >> 8));
  }
}

void get_codes(const uint8_t* rec, size_t bit, size_t n, unsigned bits, uint8_t* codes) {
  if (bit % 8 == 0) return unpack_bits(rec + bit / 8, n, bits, codes);
  const unsigned mask = (1u << bits) - 1u;
  for (size_t i = 0; i < n; ++i, bit += bits) {
    unsigned v = static_cast<unsigned>(rec[bit / 8]) >> (bit % 8);
    if (bit % 8 + bits > 8) v |= static_cast<unsigned>(rec[bit / 8 + 1]) << (8 - bit % 8);
    codes[i] = static_cast<uint8_t>(v & mask);
  }
}

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
  size_t bit = 0;
  for (size_t l = 1; l <= cfg_.levels; ++l) {
    Level lv;
    lv.bits = l == 1 ? cfg_.level1_bits : cfg_.bits;
    lv.angles = blocks_ * polar::angles_at_level(cfg_.levels, l);
    lv.bit_offset = bit;
    bit += lv.angles * lv.bits;
    lv.codebook = &polar::angle_codebook(l, lv.bits);
    lv.cells = polar::AngleCells(lv.codebook->boundaries);
    for (float c : lv.codebook->centroids) {
      lv.cosines.push_back(std::cos(c));
      lv.sines.push_back(std::sin(c));
    }
    levels_.push_back(std::move(lv));
  }
  radius_offset_ = (bit + 7) / 8;  // the angles of every level, then the fp16 radii
  sqrt_dim_ = std::sqrt(static_cast<float>(cfg_.dim));
  inv_sqrt_dim_ = 1.0f / sqrt_dim_;
  token_bytes_ = radius_offset_ + 2 * blocks_;
  rotation_ = Rotation(cfg_.dim, cfg_.seed);
}

size_t PolarCodec::state_bytes() const {
  size_t floats = 0;
  for (const Level& lv : levels_)
    floats += lv.codebook->centroids.size() + 3 * lv.codebook->boundaries.size() + lv.cosines.size() +
              lv.sines.size();  // boundaries, and their cosines and sines for the encoder
  return rotation_.state_bytes() + floats * sizeof(float);
}

void PolarCodec::encode(const float* x, size_t n, uint8_t* codes) const {
  const size_t d = cfg_.dim;
  std::vector<float> rotated(std::min(n, kChunk) * d), scratch(2 * d);
  std::vector<std::vector<uint8_t>> level_codes(levels_.size());
  for (size_t l = 0; l < levels_.size(); ++l) level_codes[l].resize(levels_[l].angles);
  for (size_t t = 0; t < n; ++t) {
    if (t % kChunk == 0) {  // rotated a chunk at a time: one batched transform
      const size_t m = std::min(kChunk, n - t);
      std::copy_n(x + t * d, m * d, rotated.data());
      rotation_.forward(rotated.data(), m);
    }
    float* y = rotated.data() + (t % kChunk) * d;
    // Level l's pairs over the whole vector are those of every block in turn (blocks are 2^levels
    // aligned), in the order the record stores them; the radii left are the blocks'.
    for (size_t l = 0; l < levels_.size(); ++l)
      polar::forward_level_cells(y, levels_[l].angles, levels_[l].cells, level_codes[l].data(),
                                 scratch.data());
    uint8_t* rec = codes + t * token_bytes_;
    std::fill_n(rec, radius_offset_, uint8_t{0});
    for (size_t b = 0; b < blocks_; ++b) {
      // Stored as radius / sqrt(dim): a rotated block's radius is at most the vector's norm, at most
      // sqrt(dim) times its largest element, which the cache keeps within fp16 range.
      const uint16_t h = f32_to_f16(y[b] * inv_sqrt_dim_);
      rec[radius_offset_ + 2 * b] = static_cast<uint8_t>(h);
      rec[radius_offset_ + 2 * b + 1] = static_cast<uint8_t>(h >> 8);
    }
    for (size_t l = 0; l < levels_.size(); ++l)
      put_codes(level_codes[l].data(), levels_[l].angles, levels_[l].bits, rec, levels_[l].bit_offset);
  }
}

void PolarCodec::decode_rotated(const uint8_t* codes, size_t n, float* y) const {
  const size_t d = cfg_.dim;
  std::vector<float> radii(d), wider(d);
  std::vector<std::vector<uint8_t>> level_codes(levels_.size());
  for (size_t l = 0; l < levels_.size(); ++l) level_codes[l].resize(levels_[l].angles);
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* rec = codes + t * token_bytes_;
    for (size_t l = 0; l < levels_.size(); ++l)
      get_codes(rec, levels_[l].bit_offset, levels_[l].angles, levels_[l].bits, level_codes[l].data());
    for (size_t b = 0; b < blocks_; ++b)
      radii[b] = f16_to_f32(static_cast<uint16_t>(rec[radius_offset_ + 2 * b] |
                                                  (rec[radius_offset_ + 2 * b + 1] << 8))) *
                 sqrt_dim_;
    // The levels from the last, over every block at once (as encode()); level 1 writes the token.
    for (size_t l = levels_.size(); l-- > 0;) {
      const Level& lv = levels_[l];
      float* out = l == 0 ? y + t * d : wider.data();
      polar::inverse_level(radii.data(), lv.angles, level_codes[l].data(), lv.cosines.data(), lv.sines.data(),
                           out);
      if (l > 0) radii.swap(wider);
    }
  }
}

void PolarCodec::check_codes(const uint8_t* codes, size_t n) const {
  for (size_t t = 0; t < n; ++t) {
    const uint8_t* rec = codes + t * token_bytes_ + radius_offset_;
    for (size_t b = 0; b < blocks_; ++b) {
      const uint16_t h = static_cast<uint16_t>(rec[2 * b] | (rec[2 * b + 1] << 8));
      // Exponent all ones is infinity or NaN; the sign bit is set only on -0 by encode.
      if ((h & 0x7C00) == 0x7C00 || ((h & 0x8000) != 0 && h != 0x8000)) {
        throw Error(fmt::format("polar: corrupt codes: token {}, block {} stores radius {}; "
                                "expected a finite radius >= 0", t, b, f16_to_f32(h)));
      }
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
  for (size_t t0 = score_lanes(rq.data(), nq, codes, n, scores); t0 < n; t0 += kChunk) {
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
  for (size_t t0 = accumulate_lanes(w, nq, codes, n, acc.data()); t0 < n; t0 += kChunk) {
    const size_t m = std::min(kChunk, n - t0);
    decode_rotated(codes + code_bytes(t0), m, y.data());
    for (size_t i = 0; i < nq; ++i) std::copy_n(w + i * n + t0, m, wc.data() + i * m);
    simd::accumulate_f32_rows(wc.data(), nq, y.data(), m, d, acc.data());
  }
  rotation_.inverse(acc.data(), nq);
  for (size_t i = 0; i < nq * d; ++i) out[i] += acc[i];
}

#if defined(__AVX512F__)
namespace {

constexpr size_t kLanes = 16;  // tokens per pass, one per lane of a 512-bit register
constexpr size_t kGroup = 4;   // queries per pass over the codes (a GQA group)

// A register's worth of lanes that std::vector keeps aligned (it drops __m512's alignment).
struct alignas(64) Reg {
  float f[kLanes];
};
__m512 load(const Reg& r) { return _mm512_load_ps(r.f); }
__m512i load_i(const Reg& r) { return _mm512_load_si512(r.f); }
void store(Reg& r, __m512 v) { _mm512_store_ps(r.f, v); }
void store(Reg& r, __m512i v) { _mm512_store_si512(r.f, v); }

// f of a `bits`-bit code (bits <= 4) as a 16-entry vpermps table. Repeated every 2^bits entries,
// so the bits of the next codes above a code's own do not change the lookup (vpermps reads only an
// index's low 4 bits).
Reg table16(unsigned bits, const auto& f) {
  Reg t;
  for (size_t k = 0; k < kLanes; ++k) t.f[k] = f(k & ((size_t{1} << bits) - 1));
  return t;
}

// Where a code sits in every token's record: `shift` bits into the 32-bit word gathered at the
// Lanes' word_bytes[word].
struct Field {
  uint32_t word, shift;
};

}  // namespace

// The codes of 16 tokens turned into, per level-1 pair of coordinates, the pair's radius (the
// block radius times the cos/sin factors of levels 2 and up, multiplied in polar::inverse's
// order) and its level-1 code, one token per lane. That is everything score() and accumulate()
// need, and no trigonometry: each factor is a vpermps of the code into a 16-entry table.
struct PolarCodec::Lanes {
  // Codes of at most 4 bits, a record of at least one word, an even number of pairs (score()
  // takes them two at a time).
  static bool fit(const PolarCodec& c) {
    return c.token_bytes_ >= 4 && c.cfg_.dim % 4 == 0 &&
           std::all_of(c.levels_.begin(), c.levels_.end(), [](const Level& lv) { return lv.bits <= 4; });
  }

  explicit Lanes(const PolarCodec& c) : codec(c), weight(c.cfg_.dim / 2), code1(c.cfg_.dim / 2) {
    // One gather per word instead of per code: a word is reused while the codes, taken in record
    // order, still fit in it (8 level-1 codes of 4 bits, two fp16 radii).
    const auto place = [&](size_t bit, unsigned width) {
      if (word_bytes.empty() || bit + width > 8 * size_t(word_bytes.back()) + 32)
        word_bytes.push_back(static_cast<int32_t>(std::min(bit / 8, c.token_bytes_ - 4)));
      return Field{static_cast<uint32_t>(word_bytes.size() - 1), static_cast<uint32_t>(bit - 8 * word_bytes.back())};
    };
    for (const Level& lv : c.levels_) {
      angle.emplace_back();
      for (size_t a = 0; a < lv.angles; ++a) angle.back().push_back(place(lv.bit_offset + a * lv.bits, lv.bits));
      cosines.push_back(table16(lv.bits, [&](size_t k) { return lv.cosines[k]; }));
      sines.push_back(table16(lv.bits, [&](size_t k) { return lv.sines[k]; }));
    }
    for (size_t b = 0; b < c.blocks_; ++b) radius.push_back(place(8 * (c.radius_offset_ + 2 * b), 16));
    words.resize(word_bytes.size());
  }

  __m512i field(Field f) const { return _mm512_srlv_epi32(load_i(words[f.word]), _mm512_set1_epi32(static_cast<int>(f.shift))); }

  // Fills weight and code1 for the 16 tokens whose records start at `codes`.
  void decode(const uint8_t* codes) {
    const __m512i record = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                              _mm512_set1_epi32(static_cast<int>(codec.token_bytes_)));
    for (size_t k = 0; k < words.size(); ++k)
      store(words[k], _mm512_i32gather_epi32(_mm512_add_epi32(record, _mm512_set1_epi32(word_bytes[k])), codes, 1));
    const size_t levels = codec.cfg_.levels, half = codec.block_ / 2;
    const __m512 sqrt_dim = _mm512_set1_ps(codec.sqrt_dim_);
    for (size_t b = 0; b < codec.blocks_; ++b) {
      Reg* r = weight.data() + b * half;
      store(r[0], _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(field(radius[b]))), sqrt_dim));
      for (size_t l = levels; l >= 2; --l) {  // polar::inverse, stopped above level 1
        const size_t per = polar::angles_at_level(levels, l);
        for (size_t j = per; j-- > 0;) {
          const __m512i code = field(angle[l - 1][b * per + j]);
          const __m512 parent = load(r[j]);
          store(r[2 * j + 1], _mm512_mul_ps(parent, _mm512_permutexvar_ps(code, load(sines[l - 1]))));
          store(r[2 * j], _mm512_mul_ps(parent, _mm512_permutexvar_ps(code, load(cosines[l - 1]))));
        }
      }
      for (size_t j = 0; j < half; ++j) store(code1[b * half + j], field(angle[0][b * half + j]));
    }
  }

  const PolarCodec& codec;
  std::vector<int32_t> word_bytes;          // byte offsets of the gathered words in a record
  std::vector<std::vector<Field>> angle;    // [level - 1][angle of the token, block-major]
  std::vector<Field> radius;                // [block]
  std::vector<Reg> cosines, sines;          // [level - 1]: tables of the centroids
  std::vector<Reg> words;                   // the gathered words of the current 16 tokens
  std::vector<Reg> weight, code1;           // [pair]
};

size_t PolarCodec::score_lanes(const float* rq, size_t nq, const uint8_t* codes, size_t n,
                               float* scores) const {
  if (!Lanes::fit(*this)) return 0;
  Lanes lanes(*this);
  const size_t d = cfg_.dim, pairs = d / 2, done = n - n % kLanes;
  const Level& l1 = levels_[0];
  std::vector<Reg> table(kGroup * pairs);
  for (size_t i0 = 0; i0 < nq; i0 += kGroup) {
    const size_t m = std::min(kGroup, nq - i0);
    // A level-1 code enters a score only through q_2p cos + q_2p+1 sin of its centroid: one table
    // per query and pair (zero for the padding queries of a short group).
    for (size_t i = 0; i < kGroup; ++i)
      for (size_t p = 0; p < pairs; ++p) {
        const float* qp = rq + (i0 + i) * d + 2 * p;
        table[i * pairs + p] = table16(l1.bits, [&](size_t k) { return i < m ? qp[0] * l1.cosines[k] + qp[1] * l1.sines[k] : 0.0f; });
      }
    for (size_t t0 = 0; t0 < done; t0 += kLanes) {
      lanes.decode(codes + code_bytes(t0));
      // Two sums per query (even and odd pairs) so that the FMA chains overlap.
      __m512 even[kGroup], odd[kGroup];
      for (size_t i = 0; i < kGroup; ++i) even[i] = odd[i] = _mm512_setzero_ps();
      const auto add = [&](__m512 sum, size_t i, size_t p) {
        return _mm512_fmadd_ps(load(lanes.weight[p]),
                               _mm512_permutexvar_ps(load_i(lanes.code1[p]), load(table[i * pairs + p])), sum);
      };
      for (size_t p = 0; p < pairs; p += 2)
#pragma GCC unroll 4  // keeps the sums in registers
        for (size_t i = 0; i < kGroup; ++i) even[i] = add(even[i], i, p), odd[i] = add(odd[i], i, p + 1);
      for (size_t i = 0; i < m; ++i) _mm512_storeu_ps(scores + (i0 + i) * n + t0, _mm512_add_ps(even[i], odd[i]));
    }
  }
  return done;
}

size_t PolarCodec::accumulate_lanes(const float* w, size_t nq, const uint8_t* codes, size_t n,
                                    float* acc) const {
  if (!Lanes::fit(*this)) return 0;
  Lanes lanes(*this);
  const size_t d = cfg_.dim, done = n - n % kLanes;
  const __m512 cos1 = load(lanes.cosines[0]), sin1 = load(lanes.sines[0]);
  // Per query and coordinate, a sum per lane, added across lanes once at the end.
  std::vector<Reg> sums(kGroup * d);
  for (size_t i0 = 0; i0 < nq; i0 += kGroup) {
    const size_t m = std::min(kGroup, nq - i0);
    for (Reg& r : sums) store(r, _mm512_setzero_ps());
    for (size_t t0 = 0; t0 < done; t0 += kLanes) {
      lanes.decode(codes + code_bytes(t0));
      __m512 wt[kGroup];
      for (size_t i = 0; i < m; ++i) wt[i] = _mm512_loadu_ps(w + (i0 + i) * n + t0);
      for (size_t p = 0; p < d / 2; ++p) {
        // The pair's two rotated coordinates, as decode_rotated() computes them.
        const __m512 r = load(lanes.weight[p]);
        const __m512i code = load_i(lanes.code1[p]);
        const __m512 x = _mm512_mul_ps(r, _mm512_permutexvar_ps(code, cos1));
        const __m512 y = _mm512_mul_ps(r, _mm512_permutexvar_ps(code, sin1));
        for (size_t i = 0; i < m; ++i) {
          Reg* o = sums.data() + i * d + 2 * p;
          store(o[0], _mm512_fmadd_ps(wt[i], x, load(o[0])));
          store(o[1], _mm512_fmadd_ps(wt[i], y, load(o[1])));
        }
      }
    }
    for (size_t i = 0; i < m; ++i)
      for (size_t c = 0; c < d; ++c) acc[(i0 + i) * d + c] += _mm512_reduce_add_ps(load(sums[i * d + c]));
  }
  return done;
}

bool PolarCodec::fused_score() const { return Lanes::fit(*this); }
#else
// Elsewhere every token goes through decode_rotated().
bool PolarCodec::fused_score() const { return false; }
size_t PolarCodec::score_lanes(const float*, size_t, const uint8_t*, size_t, float*) const { return 0; }
size_t PolarCodec::accumulate_lanes(const float*, size_t, const uint8_t*, size_t, float*) const { return 0; }
#endif

}  // namespace veloxquant
