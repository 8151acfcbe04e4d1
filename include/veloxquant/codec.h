// The codec interface: how one stream of vectors (the keys or the values of one KV head) is
// stored. Modelled on FAISS's Quantizer plus its distance computers: encode/decode, plus scoring a
// query and accumulating weighted values straight from the codes where the maths allows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace veloxquant {

class Codec {
 public:
  virtual ~Codec() = default;

  // Vector length.
  virtual size_t dim() const = 0;
  // Tokens encoded together (KIVI keys share scales across a group of tokens); encode(), decode(),
  // score() and accumulate() take a multiple of this many tokens. 1 for per-vector codecs.
  virtual size_t block_tokens() const { return 1; }
  // Exact bytes of the codes of n tokens (n a multiple of block_tokens()). Additive: the codes of
  // tokens [a, b) start at byte code_bytes(a) of a stream, so streams append and slice.
  virtual size_t code_bytes(size_t n) const = 0;
  // Bytes of the fitted state all blocks share (rotation signs, projections, codebooks), stored
  // once per stream.
  virtual size_t state_bytes() const = 0;

  // Calibration: codecs with learned parameters (codebooks, smoothing factors) fit them to
  // representative samples ([n, dim]) before the first encode. Tuning-free codecs (every method
  // of the foundation release) need none: needs_fit() is false and fit() changes nothing.
  virtual bool needs_fit() const { return false; }
  virtual void fit(const float* /*samples*/, size_t /*n*/) {}

  // x: [n, dim] row-major. REQUIRES: n % block_tokens() == 0, values finite with |x| <= 65504
  // (KVCache::append refuses anything else; docs/reliability.md has what each codec does at the
  // edges of that range).
  virtual void encode(const float* x, size_t n, uint8_t* codes) const = 0;
  virtual void decode(const uint8_t* codes, size_t n, float* x) const = 0;

  // Codes from outside this process (a session file) may be corrupt. Throws Error naming the
  // first field encode() cannot have written; the default accepts every byte pattern, which is
  // right for codecs whose codes are plain indices into complete tables. decode(), score() and
  // accumulate() REQUIRE codes that encode() wrote or that passed this check: the attention hot
  // path does not check them again.
  virtual void check_codes(const uint8_t* /*codes*/, size_t /*n*/) const {}

  // True when score() / accumulate() work on the codes without reconstructing vectors. When
  // false the defaults below decode in chunks and compute in f32, which is always correct.
  virtual bool fused_score() const { return false; }
  virtual bool fused_accumulate() const { return false; }

  // scores[i * n + t] = q_i . x_t for nq queries q ([nq, dim]) and the n encoded tokens.
  virtual void score(const float* q, size_t nq, const uint8_t* codes, size_t n,
                     float* scores) const;
  // out[i * dim + c] += sum_t w[i * n + t] * x_t[c] for nq weight rows w ([nq, n]).
  virtual void accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                          float* out) const;
};

}  // namespace veloxquant
