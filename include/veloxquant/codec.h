// The codec interface: how one stream of vectors (the keys or the values of one KV head) is
// stored. Modelled on FAISS's Quantizer plus its distance computers: encode/decode, plus scoring a
// query and accumulating weighted values straight from the codes where the maths allows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <vector>

namespace veloxquant {

// The score of a token a query does not read (Codec::select): exp() of it underflows to 0, and
// soft-capping leaves it as it is.
inline constexpr float kExcluded = -std::numeric_limits<float>::max();

class Codec {
 public:
  virtual ~Codec() = default;

  // Vector length.
  virtual size_t dim() const = 0;
  // Tokens encoded together (KIVI keys share scales across a group of tokens); encode(), decode(),
  // score() and accumulate() take a multiple of this many tokens. 1 for per-vector codecs.
  virtual size_t block_tokens() const { return 1; }
  // Bytes of the codes of n tokens (n a multiple of block_tokens()), additive. For a fixed-length
  // codec this is exact: the codes of tokens [a, b) start at byte code_bytes(a) of a stream, so
  // streams append and slice by arithmetic. For a variable-length codec it is an upper bound: the
  // most encode() can write for n tokens, which callers size buffers by.
  virtual size_t code_bytes(size_t n) const = 0;
  // Variable-length codecs (entropy coders: cachegen) store each block in the bytes its data
  // codes to, because padding every block to its worst case would count bytes the coder saved as
  // stored. encode() then writes its blocks back to back, and each block states its own length
  // in its first bytes: a stream's size, and where each block starts, are read back from the
  // codes themselves (encoded_bytes), so a cache needs no offset table that a session file would
  // have to carry and a damaged file could contradict.
  virtual bool variable_length() const { return false; }
  // Bytes of the encoded block that starts at `block`, of which `available` bytes may be read.
  // The default (fixed length) is code_bytes(block_tokens()). Throws Error naming the field when
  // the block's length cannot be read from it or it runs past `available` (codes from a damaged
  // file); reads nothing beyond `available`.
  virtual size_t encoded_block_bytes(const uint8_t* block, size_t available) const;
  // Bytes the blocks of the first n tokens at `codes` occupy: code_bytes(n) for a fixed-length
  // codec, the sum of the blocks' own lengths for a variable-length one. Throws Error naming the
  // block when one does not parse or the blocks need more than `available` bytes.
  size_t encoded_bytes(const uint8_t* codes, size_t n, size_t available) const;
  // Bytes of the fitted state all blocks share (rotation signs, projections, codebooks), stored
  // once per stream.
  virtual size_t state_bytes() const = 0;

  // x: [n, dim] row-major. REQUIRES: n % block_tokens() == 0, values finite with |x| <= 65504
  // (KVCache::append refuses anything else; docs/reliability.md has what each codec does at the
  // edges of that range).
  virtual void encode(const float* x, size_t n, uint8_t* codes) const = 0;
  virtual void decode(const uint8_t* codes, size_t n, float* x) const = 0;

  // Fitted per stream (svdq, palu): bases fitted to the first tokens a layer encodes (the prompt,
  // at prefill) instead of ahead of time. The codec make() returns is then a prototype that
  // reports sizes but never encodes. Before a layer's first block is encoded, the cache calls
  // fit_streams() with every token it holds of every KV head, x: [n, heads, dim], keeps state h
  // with stream h (CacheStream::state: counted by bytes(), saved by session files) and encodes
  // stream h through with_states(states, head). A group of heads may share one fitted basis: it
  // is stored in the state of the group's first head, and the others' states may be empty.
  virtual bool fits_streams() const { return false; }
  virtual std::vector<std::vector<uint8_t>> fit_streams(const float* x, size_t n,
                                                        size_t heads) const;
  // Throws Error naming what is wrong when the states are not what fit_streams() returns for this
  // codec (states from a damaged session file).
  virtual std::unique_ptr<Codec> with_states(const std::vector<std::vector<uint8_t>>& states,
                                             size_t head) const;
  // The bytes fit_streams() stores with one stream (the largest, when a group shares a state).
  virtual size_t stream_state_bytes() const { return 0; }
  // The states come from the spec alone (its artifact's tables), whatever the tokens: fit_streams()
  // may then be called with no tokens, and a stream restored without its state gets that one.
  virtual bool states_from_spec() const { return false; }

  // Saliency (zipcache): codecs that store each token by the attention it receives. The cache
  // keeps such a codec's tokens in fp16 until the queries of the step that appended them have
  // attended (KVCache::attend_observed), and encodes them at the end of the step
  // (KVCache::finish_step) with encode_salient(): attention[t] is token t's normalized attention,
  // the mean probability the query rows that saw it gave it (which, unlike a sum, does not
  // favour older tokens). nullptr when no query has attended: the codec then falls back to a
  // proxy of its own (encode() does the same).
  virtual bool wants_attention() const { return false; }
  virtual void encode_salient(const float* x, size_t n, const float* attention,
                              uint8_t* codes) const {
    (void)attention;
    encode(x, n, codes);
  }

  // Codes from outside this process (a session file) may be corrupt. Throws Error naming the
  // first field encode() cannot have written; the default accepts every byte pattern, which is
  // right for codecs whose codes are plain indices into complete tables. decode(), score() and
  // accumulate() REQUIRE codes that encode() wrote or that passed this check: the attention hot
  // path does not check them again. For a variable-length codec, REQUIRES: the blocks lie within
  // the buffer (encoded_bytes() accepted them), which KVCache::restore checks first.
  virtual void check_codes(const uint8_t* /*codes*/, size_t /*n*/) const {}

  // True when score() / accumulate() work on the codes without reconstructing vectors. When
  // false the defaults below decode in chunks and compute in f32, which is always correct.
  virtual bool fused_score() const { return false; }
  virtual bool fused_accumulate() const { return false; }

  // A codec that stores vectors in a basis of its own (a random rotation B: x = B^T y) can decode
  // y = B x without going back. Attention over many queries (prefill) then maps the queries and
  // its outputs once per row instead of every stored vector. to_basis maps n stored rows
  // [n, dim] to B x in place, from_basis back; queries_to_basis maps query rows so that their
  // products with to_basis(x) are their products with x: B^-T q, which is to_basis for an
  // orthogonal B.
  virtual bool decodes_in_basis() const { return false; }
  virtual void decode_in_basis(const uint8_t* codes, size_t n, float* y) const { decode(codes, n, y); }
  virtual void to_basis(float* /*x*/, size_t /*n*/) const {}
  virtual void from_basis(float* /*x*/, size_t /*n*/) const {}
  virtual void queries_to_basis(float* x, size_t n) const { to_basis(x, n); }
  // A low-rank codec's decoded rows are zero past their first basis_width() columns in its basis:
  // decode_in_basis writes only those (the others of each row are left as they were), and prefill
  // multiplies only those.
  virtual size_t basis_width() const { return dim(); }

  // Token selection (rabitq's nprobe): each query reads only some of the encoded tokens, as an
  // inverted-file index reads only the lists it probes; the others get no attention. select()
  // sets keep[i * n + t] to 1 for the tokens query i reads and 0 for the rest, and keeps token 0
  // for every query, so that no query reads nothing. score() of such a codec writes kExcluded for
  // the tokens it does not read (and skips their work); the cache's attention paths give those
  // tokens weight 0. For keys stored after RoPE: the queries are the ones attention sees.
  virtual bool selects_tokens() const { return false; }
  virtual void select(const float* q, size_t nq, const uint8_t* codes, size_t n, uint8_t* keep) const;

  // scores[i * n + t] = q_i . x_t for nq queries q ([nq, dim]) and the n encoded tokens.
  virtual void score(const float* q, size_t nq, const uint8_t* codes, size_t n,
                     float* scores) const;
  // out[i * dim + c] += sum_t w[i * n + t] * x_t[c] for nq weight rows w ([nq, n]).
  virtual void accumulate(const float* w, size_t nq, const uint8_t* codes, size_t n,
                          float* out) const;
};

// The codec that encodes a lone stream whose first tokens are x ([n, dim]): `codec` itself (not
// owned) when it is not fitted per stream, else the codec fitted to x as a layer of one KV head.
// For codec-level tests and tools; KVCache fits its streams itself. Throws ShapeError when a codec
// fitted per stream gets n = 0.
std::shared_ptr<const Codec> codec_for_stream(const Codec& codec, const float* x, size_t n);

}  // namespace veloxquant
