#include "codecs/comm_vq/comm_vq_fit.h"

#include <algorithm>

#include "codecs/comm_vq/comm_vq_key_codec.h"
#include "core/rng.h"
#include "veloxquant/tensor.h"

namespace veloxquant::comm_vq {
namespace {

struct State {
  size_t tokens, dim, books, entries;
  std::vector<float> x, codebooks;  // keys [tokens][dim], codebooks [books][entries][dim]
  std::vector<uint8_t> codes;       // [tokens][books]
  std::vector<float> decoded;       // [tokens][dim], the sum of each key's centroids

  const float* centroid(size_t b, size_t e) const { return codebooks.data() + (b * entries + e) * dim; }
  void decode_all() {
    for (size_t t = 0; t < tokens; ++t)
      decode_sum(codes.data() + t * books, codebooks.data(), books, entries, dim, decoded.data() + t * dim);
  }
  double error(size_t t) const {
    double e = 0;
    for (size_t c = 0; c < dim; ++c) {
      const double d = x[t * dim + c] - decoded[t * dim + c];
      e += d * d;
    }
    return e;
  }
  double distortion() const {
    double sum = 0;
    for (size_t t = 0; t < tokens; ++t) sum += error(t);
    return sum / static_cast<double>(tokens);
  }
};

void e_step(State& s) {
  const std::vector<float> norms = centroid_norms(s.codebooks, s.dim);
  std::vector<uint8_t> codes(s.books);
  for (size_t t = 0; t < s.tokens; ++t) {
    const double err = encode_residual(s.x.data() + t * s.dim, s.codebooks.data(), norms.data(), s.books,
                                       s.entries, s.dim, codes.data());
    if (err < s.error(t)) {
      std::copy(codes.begin(), codes.end(), s.codes.begin() + static_cast<std::ptrdiff_t>(t * s.books));
      decode_sum(codes.data(), s.codebooks.data(), s.books, s.entries, s.dim, s.decoded.data() + t * s.dim);
    }
  }
}

void m_step(State& s) {
  const size_t d = s.dim;
  std::vector<double> sum(s.entries * d);
  std::vector<size_t> count(s.entries);
  for (size_t b = 0; b < s.books; ++b) {
    std::fill(sum.begin(), sum.end(), 0.0);
    std::fill(count.begin(), count.end(), 0);
    // Key t's target for codebook b: what the other codebooks leave, key - decoded + its centroid.
    for (size_t t = 0; t < s.tokens; ++t) {
      const size_t e = s.codes[t * s.books + b];
      const float* c = s.centroid(b, e);
      for (size_t i = 0; i < d; ++i) sum[e * d + i] += s.x[t * d + i] - s.decoded[t * d + i] + c[i];
      ++count[e];
    }
    std::vector<float> old(s.codebooks.begin() + static_cast<std::ptrdiff_t>(b * s.entries * d),
                           s.codebooks.begin() + static_cast<std::ptrdiff_t>((b + 1) * s.entries * d));
    for (size_t e = 1; e < s.entries; ++e) {  // centroid 0 stays the origin
      if (count[e] == 0) continue;
      float* c = s.codebooks.data() + (b * s.entries + e) * d;
      for (size_t i = 0; i < d; ++i) c[i] = static_cast<float>(sum[e * d + i] / static_cast<double>(count[e]));
    }
    for (size_t t = 0; t < s.tokens; ++t) {
      const size_t e = s.codes[t * s.books + b];
      const float* c = s.centroid(b, e);
      for (size_t i = 0; i < d; ++i) s.decoded[t * d + i] += c[i] - old[e * d + i];
    }
  }
  s.decode_all();  // exact sums again, without the rounding the updates above accumulated
}

}  // namespace

FittedHead fit_head(const float* keys, size_t tokens, size_t stride, size_t dim, size_t books,
                    size_t entries, size_t iterations, uint64_t seed) {
  State s{tokens, dim, books, entries, std::vector<float>(tokens * dim), {}, std::vector<uint8_t>(tokens * books),
          std::vector<float>(tokens * dim, 0.0f)};
  for (size_t t = 0; t < tokens; ++t) std::copy_n(keys + t * stride, dim, s.x.data() + t * dim);
  // Seeding: centroid 0 of every codebook is the origin, and stays there, so that a zero key is
  // stored and decoded as exactly zero (the greedy search picks it for a zero residual); the
  // others start as distinct rows, drawn at random, of what codebooks 0..b-1 leave of the keys
  // (the residual). EM then moves them.
  std::vector<float> residual = s.x;
  for (size_t b = 0; b < books; ++b) {
    Rng rng(derive_seed(seed, {static_cast<uint64_t>(b)}));
    std::vector<size_t> rows(tokens);
    for (size_t t = 0; t < tokens; ++t) rows[t] = t;
    s.codebooks.insert(s.codebooks.end(), dim, 0.0f);
    for (size_t i = 0; i + 1 < entries; ++i) {
      // A partial Fisher-Yates shuffle; with fewer keys than entries the rows repeat.
      const size_t pick = i < tokens ? i + static_cast<size_t>(rng.next_u64() % (tokens - i)) : i % tokens;
      if (i < tokens) std::swap(rows[i], rows[pick]);
      const float* r = residual.data() + rows[i < tokens ? i : pick] * dim;
      s.codebooks.insert(s.codebooks.end(), r, r + dim);
    }
    const float* book = s.codebooks.data() + b * entries * dim;
    const std::vector<float> norms = centroid_norms(Codebooks(book, book + entries * dim), dim);
    for (size_t t = 0; t < tokens; ++t) {
      float* r = residual.data() + t * dim;
      uint8_t& code = s.codes[t * books + b];
      encode_residual(r, book, norms.data(), 1, entries, dim, &code);
      for (size_t i = 0; i < dim; ++i) r[i] -= book[code * dim + i];
    }
  }
  s.decode_all();
  FittedHead f;
  f.distortion.push_back(s.distortion());
  for (size_t it = 0; it < iterations; ++it) {
    e_step(s);
    m_step(s);
    f.distortion.push_back(s.distortion());
  }
  // The codec stores its codebooks in fp16: round here so the artifact holds what is used.
  f.codebooks.reserve(s.codebooks.size());
  for (float v : s.codebooks) f.codebooks.push_back(f16_to_f32(f32_to_f16(v)));
  return f;
}

}  // namespace veloxquant::comm_vq
