#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "codecs/fp16/fp16_codec.h"
#include "core/blas.h"
#include "core/parallel.h"
#include "core/simd.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

// Query rows per KV head from which AttendPath::Auto decodes once and multiplies matrices
// instead of scoring every query on the codes (measured with veloxquant_bench_runtime).
constexpr size_t kDecodedRows = 16;
// Below these amounts of work per call, appends and attention stay on the calling thread: a
// small model's decode step would spend more time waking threads than computing.
constexpr size_t kParallelAppendElements = size_t{1} << 14;
constexpr size_t kParallelAttendMacs = size_t{1} << 17;

void check_kv(const TensorView& t, const char* what, size_t heads, size_t dim) {
  if (t.rank != 3 || t.dim(1) != heads || t.dim(2) != dim) {
    throw ShapeError(std::string(what) + " has shape " + t.shape_string() + "; expected [tokens, " +
                     std::to_string(heads) + ", " + std::to_string(dim) + "]");
  }
  if (t.dim(0) == 0) throw ShapeError(std::string(what) + " is empty (0 tokens); expected at least 1");
  if (t.data == nullptr) throw ShapeError(std::string(what) + " has no data");
}

// Appended values must be finite (a NaN or infinity would spread into every attention output
// that reads it) and within the fp16 range (recent tokens are stored in fp16, where a larger
// finite value would silently become infinity). The error names where the value is, so that the
// model layer, head and token that produced it can be found. `x` is [tokens, heads, dim].
void check_storable(const std::vector<float>& x, const char* what, const LayerShape& shape,
                    size_t first_token) {
  for (size_t i = 0; i < x.size(); ++i) {
    const bool finite = std::isfinite(x[i]);
    if (finite && std::fabs(x[i]) <= 65504.0f) continue;
    const size_t row = shape.kv_heads * shape.head_dim, t = i / row;
    throw ShapeError(fmt::format(
        "layer {} {}: token {} of the append (cache position {}), head {}, channel {} is {}; {}",
        shape.layer, what, t, first_token + t, i % row / shape.head_dim, i % shape.head_dim, x[i],
        finite ? "expected |x| <= 65504 (the fp16 range recent tokens are stored in)"
               : "expected a finite number"));
  }
}

// Why `s` cannot be a stream that `codec` with this residual window stored for `tokens` tokens;
// "" when it can. Mirrors what Impl::push leaves behind: whole blocks encoded, and a tail that
// holds the residual window plus less than one block (only the window before any block ages out).
std::string stream_layout_error(const CacheStream& s, const Codec& codec, size_t residual,
                                size_t tokens, size_t row_bytes) {
  const size_t block = codec.block_tokens();
  if (s.encoded > tokens || s.tail_tokens != tokens - s.encoded) {
    return fmt::format("holds {} encoded + {} tail tokens; expected {} in all", s.encoded,
                       s.tail_tokens, tokens);
  }
  if (s.encoded % block != 0) {
    return fmt::format("has {} encoded tokens; expected a multiple of the codec's block of {}",
                       s.encoded, block);
  }
  if (s.codes.size() != codec.code_bytes(s.encoded)) {
    return fmt::format("has {} code bytes for {} tokens; expected {}", s.codes.size(), s.encoded,
                       codec.code_bytes(s.encoded));
  }
  if (s.tail.size() != s.tail_tokens * row_bytes) {
    return fmt::format("has {} tail bytes for {} tokens; expected {}", s.tail.size(),
                       s.tail_tokens, s.tail_tokens * row_bytes);
  }
  if (s.tail_tokens >= residual + block || (s.encoded > 0 && s.tail_tokens < residual)) {
    return fmt::format("keeps {} tokens in fp16 with {} encoded; a residual window of {} and "
                       "blocks of {} keep {}..{}", s.tail_tokens, s.encoded, residual, block,
                       s.encoded > 0 ? residual : 0, residual + block - 1);
  }
  for (size_t i = 0; i + 1 < s.tail.size(); i += 2) {
    if ((s.tail[i + 1] & 0x7C) == 0x7C) {  // exponent all ones: infinity or NaN
      return fmt::format("has a non-finite fp16 value at tail byte {}; expected finite values", i);
    }
  }
  return "";
}

}  // namespace

struct KVCache::Impl {
  Spec spec;
  LayerShape shape;
  LayerCodecs codecs;
  Fp16Codec fp16;
  std::vector<CacheStream> keys, values;  // one per KV head
  size_t tokens = 0;

  Impl(Spec s, const LayerShape& sh)
      : spec(std::move(s)), shape(sh), codecs(spec.method->make(spec.params, sh)), fp16(sh.head_dim),
        keys(sh.kv_heads), values(sh.kv_heads) {}

  // Appends rows of one head (f32, [n, dim] with the given row stride) to the fp16 tail, then
  // encodes every full block that has aged out of the residual window.
  void push(CacheStream& s, const Codec& codec, const float* rows, size_t n, size_t stride) const {
    const size_t d = shape.head_dim, row_bytes = fp16.code_bytes(1);
    const size_t old = s.tail.size();
    s.tail.resize(old + n * row_bytes);
    for (size_t t = 0; t < n; ++t) fp16.encode(rows + t * stride, 1, s.tail.data() + old + t * row_bytes);
    s.tail_tokens += n;
    const size_t block = codec.block_tokens();
    if (s.tail_tokens < codecs.residual + block) return;
    const size_t m = (s.tail_tokens - codecs.residual) / block * block;
    std::vector<float> x(m * d);
    fp16.decode(s.tail.data(), m, x.data());
    const size_t at = s.codes.size();
    s.codes.resize(at + codec.code_bytes(m));
    codec.encode(x.data(), m, s.codes.data() + at);
    s.encoded += m;
    s.tail.erase(s.tail.begin(), s.tail.begin() + static_cast<std::ptrdiff_t>(m * row_bytes));
    s.tail_tokens -= m;
  }

  size_t stream_bytes(const std::vector<CacheStream>& v, const Codec& c) const {
    size_t b = c.state_bytes();
    for (const auto& s : v) b += s.codes.size() + s.tail.size();
    return b;
  }

  void decode_stream(const CacheStream& s, const Codec& c, float* out) const {
    c.decode(s.codes.data(), s.encoded, out);
    fp16.decode(s.tail.data(), s.tail_tokens, out + s.encoded * shape.head_dim);
  }

  std::vector<float> decode_all(const std::vector<CacheStream>& v, const Codec& c) const {
    const size_t d = shape.head_dim, h = shape.kv_heads;
    std::vector<float> out(tokens * h * d), head(tokens * d);
    for (size_t k = 0; k < h; ++k) {
      decode_stream(v[k], c, head.data());
      for (size_t t = 0; t < tokens; ++t) std::copy_n(head.data() + t * d, d, out.data() + (t * h + k) * d);
    }
    return out;
  }

  // Attention for the `rows` query rows of one KV head; row r belongs to query token
  // first_token + r / group and sees cache tokens [0, tokens - nq + first_token + r / group].
  // Fused: scores and weighted sums straight from the codes.
  void attend_fused(size_t head, const float* q, size_t rows, size_t group, size_t first_token,
                    size_t nq, float* out) const;
  // Reference: decode everything to f32, then plain softmax attention.
  // Decoded: each head decoded once, then scores and outputs as matrix products.
  void attend_decoded(size_t head, const float* q, size_t rows, size_t group, size_t first_token,
                      size_t nq, float* out) const;
  void attend_reference(size_t head, const float* q, size_t rows, size_t group,
                        size_t first_token, size_t nq, float* out) const;
};

namespace {
// Per-thread scratch reused across attend calls, so that a long cache does not fault in fresh
// pages for its score rows at every decode step.
float* scratch(size_t slot, size_t n) {
  thread_local std::vector<float> buffers[6];
  if (buffers[slot].size() < n) buffers[slot].resize(n);
  return buffers[slot].data();
}

// A matrix of `rows` rows whose columns [0, split) live in `head` ([rows][split]) and the rest in
// `tail` ([rows][cols - split]): scores of encoded tokens and of the fp16 tail, without copying.
struct SplitRows {
  float* head;
  float* tail;
  size_t split, cols;
  // Copies row r's columns [from, from + n) to dst.
  void copy(size_t r, size_t from, size_t n, float* dst) const {
    const size_t in_head = from < split ? std::min(n, split - from) : 0;
    std::copy_n(head + r * split + from, in_head, dst);
    if (n > in_head) std::copy_n(tail + r * (cols - split) + (from + in_head - split), n - in_head, dst + in_head);
  }
};
}  // namespace

void KVCache::Impl::attend_fused(size_t head, const float* q, size_t rows, size_t group,
                                 size_t first_token, size_t nq, float* out) const {
  const CacheStream& ks = keys[head];
  const CacheStream& vs = values[head];
  const size_t d = shape.head_dim;
  const SplitRows s{scratch(0, rows * ks.encoded), scratch(1, rows * ks.tail_tokens), ks.encoded, tokens};
  if (ks.encoded) codecs.key->score(q, rows, ks.codes.data(), ks.encoded, s.head);
  if (ks.tail_tokens) fp16.score(q, rows, ks.tail.data(), ks.tail_tokens, s.tail);
  // Causal softmax in place; masked tokens get weight 0.
  for (size_t r = 0; r < rows; ++r) {
    const size_t visible = tokens - nq + first_token + r / group + 1;
    const size_t in_head = std::min(visible, s.split), in_tail = visible - in_head;
    float* h = s.head + r * s.split;
    float* t = s.tail + r * (tokens - s.split);
    simd::softmax(h, in_head, t, in_tail);
    std::fill(h + in_head, h + s.split, 0.0f);
    std::fill(t + in_tail, t + (tokens - s.split), 0.0f);
  }
  std::fill(out, out + rows * d, 0.0f);
  // The value stream may split at another token (its block size differs): re-split the weights.
  SplitRows w = s;
  if (vs.encoded != ks.encoded) {
    w = SplitRows{scratch(2, rows * vs.encoded), scratch(3, rows * vs.tail_tokens), vs.encoded, tokens};
    for (size_t r = 0; r < rows; ++r) {
      s.copy(r, 0, vs.encoded, w.head + r * vs.encoded);
      s.copy(r, vs.encoded, vs.tail_tokens, w.tail + r * vs.tail_tokens);
    }
  }
  if (vs.encoded) codecs.value->accumulate(w.head, rows, vs.codes.data(), vs.encoded, out);
  if (vs.tail_tokens) fp16.accumulate(w.tail, rows, vs.tail.data(), vs.tail_tokens, out);
}

void KVCache::Impl::attend_decoded(size_t head, const float* q, size_t rows, size_t group,
                                   size_t first_token, size_t nq, float* out) const {
  const size_t d = shape.head_dim;
  // Tokens visible to the last row of this chunk; earlier rows see fewer (causal).
  const size_t visible = tokens - nq + first_token + (rows - 1) / group + 1;
  float* k = scratch(0, tokens * d);
  float* v = scratch(1, tokens * d);
  float* p = scratch(2, rows * visible);
  decode_stream(keys[head], *codecs.key, k);
  decode_stream(values[head], *codecs.value, v);
  configure_blas();
  const auto ri = [](size_t x) { return static_cast<blasint>(x); };
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ri(rows), ri(visible), ri(d), 1.0f, q, ri(d),
              k, ri(d), 0.0f, p, ri(visible));
  for (size_t r = 0; r < rows; ++r) {
    const size_t seen = tokens - nq + first_token + r / group + 1;
    float* row = p + r * visible;
    simd::softmax(row, seen, nullptr, 0);
    std::fill(row + seen, row + visible, 0.0f);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ri(rows), ri(d), ri(visible), 1.0f, p,
              ri(visible), v, ri(d), 0.0f, out, ri(d));
}

void KVCache::Impl::attend_reference(size_t head, const float* q, size_t rows, size_t group,
                                     size_t first_token, size_t nq, float* out) const {
  const size_t d = shape.head_dim;
  std::vector<float> k(tokens * d), v(tokens * d), scores(tokens);
  decode_stream(keys[head], *codecs.key, k.data());
  decode_stream(values[head], *codecs.value, v.data());
  std::fill(out, out + rows * d, 0.0f);
  for (size_t r = 0; r < rows; ++r) {
    const size_t visible = tokens - nq + first_token + r / group + 1;
    float mx = -std::numeric_limits<float>::infinity();
    for (size_t t = 0; t < visible; ++t) {
      float dot = 0;
      for (size_t c = 0; c < d; ++c) dot += q[r * d + c] * k[t * d + c];
      scores[t] = dot;
      mx = std::max(mx, dot);
    }
    float sum = 0;
    for (size_t t = 0; t < visible; ++t) sum += (scores[t] = std::exp(scores[t] - mx));
    for (size_t t = 0; t < visible; ++t)
      for (size_t c = 0; c < d; ++c) out[r * d + c] += scores[t] / sum * v[t * d + c];
  }
}

KVCache::KVCache(std::string_view spec, const LayerShape& shape) : KVCache(parse_spec(spec), shape) {}

KVCache::KVCache(Spec spec, const LayerShape& shape) {
  if (spec.method == nullptr) throw SpecError("KVCache needs a parsed spec");
  if (shape.kv_heads == 0 || shape.head_dim == 0) {
    throw ShapeError("layer shape kv_heads=" + std::to_string(shape.kv_heads) + " head_dim=" +
                     std::to_string(shape.head_dim) + "; expected both >= 1");
  }
  impl_ = std::make_unique<Impl>(std::move(spec), shape);
  if (impl_->codecs.key->dim() != shape.head_dim || impl_->codecs.value->dim() != shape.head_dim) {
    throw Error(impl_->spec.to_string() + ": codec dimension differs from head_dim " +
                std::to_string(shape.head_dim));
  }
}

KVCache::~KVCache() = default;
KVCache::KVCache(KVCache&&) noexcept = default;
KVCache& KVCache::operator=(KVCache&&) noexcept = default;

void KVCache::append(const TensorView& k, const TensorView& v) {
  append_checked(k, v, [](std::vector<float>&) {});
}

void KVCache::append(const TensorView& k, const TensorView& v, std::span<const int64_t> positions,
                     const RopeParams& rope) {
  if (k.rank >= 1 && positions.size() != k.dim(0)) {
    throw ShapeError("append got " + std::to_string(positions.size()) + " positions for " +
                     std::to_string(k.dim(0)) + " key tokens; expected one per token");
  }
  const size_t h = impl_->shape.kv_heads, d = impl_->shape.head_dim;
  append_checked(k, v, [&](std::vector<float>& keys) {
    for (size_t t = 0; t < positions.size(); ++t) apply_rope(rope, keys.data() + t * h * d, h, d, positions[t]);
  });
}

template <class Transform>
void KVCache::append_checked(const TensorView& k, const TensorView& v, Transform&& transform_keys) {
  Impl& m = *impl_;
  const size_t h = m.shape.kv_heads, d = m.shape.head_dim;
  check_kv(k, "keys", h, d);
  check_kv(v, "values", h, d);
  if (k.dim(0) != v.dim(0)) {
    throw ShapeError("keys have " + std::to_string(k.dim(0)) + " tokens but values have " +
                     std::to_string(v.dim(0)) + "; expected the same count");
  }
  std::vector<float> kf(k.numel()), vf(v.numel());
  k.to_f32(kf.data());
  v.to_f32(vf.data());
  check_storable(kf, "keys", m.shape, m.tokens);
  check_storable(vf, "values", m.shape, m.tokens);
  transform_keys(kf);
  // RoPE keeps each pair's norm but may move a value near the fp16 limit past it.
  check_storable(kf, "keys after RoPE", m.shape, m.tokens);
  const size_t n = k.dim(0);
  parallel_for(h, [&](size_t head) {
    m.push(m.keys[head], *m.codecs.key, kf.data() + head * d, n, h * d);
    m.push(m.values[head], *m.codecs.value, vf.data() + head * d, n, h * d);
  }, n * h * d >= kParallelAppendElements);
  m.tokens += n;
}

void KVCache::attend(const TensorView& q, float* out, AttendPath path) const {
  const Impl& m = *impl_;
  const size_t h = m.shape.kv_heads, d = m.shape.head_dim;
  if (q.rank != 3 || q.dim(2) != d || q.dim(1) == 0 || q.dim(1) % h != 0) {
    throw ShapeError("queries have shape " + q.shape_string() + "; expected [n, q_heads, " +
                     std::to_string(d) + "] with q_heads a multiple of kv_heads " + std::to_string(h));
  }
  const size_t nq = q.dim(0), qh = q.dim(1), group = qh / h;
  if (nq == 0 || nq > m.tokens) {
    throw ShapeError("attend got " + std::to_string(nq) + " query tokens with " +
                     std::to_string(m.tokens) + " cached; expected 1.." + std::to_string(m.tokens));
  }
  const std::vector<float> qf = to_f32_checked(q, "queries");
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Bound the score matrix of one head to about 16M floats by processing query tokens in chunks.
  const size_t chunk = std::max<size_t>(1, (size_t{1} << 24) / (group * m.tokens));
  const size_t chunks = (nq + chunk - 1) / chunk;
  parallel_for(h * chunks, [&](size_t job) {
    const size_t head = job / chunks, i0 = job % chunks * chunk;
    const size_t ni = std::min(chunk, nq - i0), rows = ni * group;
    float* qs = scratch(4, rows * d);  // slots 0-3 belong to the attend paths
    float* o = scratch(5, rows * d);
    for (size_t i = 0; i < ni; ++i)
      for (size_t g = 0; g < group; ++g)
        for (size_t c = 0; c < d; ++c)
          qs[(i * group + g) * d + c] = qf[((i0 + i) * qh + head * group + g) * d + c] * scale;
    AttendPath p = path;
    if (p == AttendPath::Auto) p = rows >= kDecodedRows ? AttendPath::Decoded : AttendPath::Fused;
    if (p == AttendPath::Fused) m.attend_fused(head, qs, rows, group, i0, nq, o);
    else if (p == AttendPath::Decoded) m.attend_decoded(head, qs, rows, group, i0, nq, o);
    else m.attend_reference(head, qs, rows, group, i0, nq, o);
    for (size_t i = 0; i < ni; ++i)
      for (size_t g = 0; g < group; ++g)
        std::copy_n(o + (i * group + g) * d, d, out + ((i0 + i) * qh + head * group + g) * d);
  }, nq * qh * m.tokens * d >= kParallelAttendMacs);
}

size_t KVCache::tokens() const { return impl_->tokens; }
size_t KVCache::kv_heads() const { return impl_->shape.kv_heads; }
size_t KVCache::head_dim() const { return impl_->shape.head_dim; }
size_t KVCache::key_bytes() const { return impl_->stream_bytes(impl_->keys, *impl_->codecs.key); }
size_t KVCache::value_bytes() const {
  return impl_->stream_bytes(impl_->values, *impl_->codecs.value);
}
size_t KVCache::fp16_bytes() const { return 2 * 2 * impl_->tokens * kv_heads() * head_dim(); }
std::vector<float> KVCache::decode_keys() const { return impl_->decode_all(impl_->keys, *impl_->codecs.key); }
std::vector<float> KVCache::decode_values() const {
  return impl_->decode_all(impl_->values, *impl_->codecs.value);
}
const Spec& KVCache::spec() const { return impl_->spec; }
const LayerShape& KVCache::shape() const { return impl_->shape; }
const std::vector<CacheStream>& KVCache::key_streams() const { return impl_->keys; }
const std::vector<CacheStream>& KVCache::value_streams() const { return impl_->values; }

void KVCache::restore(std::vector<CacheStream> keys, std::vector<CacheStream> values) {
  Impl& m = *impl_;
  const size_t h = m.shape.kv_heads;
  if (keys.size() != h || values.size() != h) {
    throw Error(fmt::format("restore got {} key and {} value streams; expected {} of each (one per "
                            "KV head)", keys.size(), values.size(), h));
  }
  size_t tokens = 0;
  if (__builtin_add_overflow(keys[0].encoded, keys[0].tail_tokens, &tokens)) {
    throw Error(fmt::format("restore got a key stream of {} + {} tokens; the sum overflows",
                            keys[0].encoded, keys[0].tail_tokens));
  }
  const size_t row_bytes = m.fp16.code_bytes(1);
  for (const char* kind : {"key", "value"}) {
    const bool is_key = kind[0] == 'k';
    const std::vector<CacheStream>& streams = is_key ? keys : values;
    const Codec& codec = is_key ? *m.codecs.key : *m.codecs.value;
    for (size_t head = 0; head < h; ++head) {
      const std::string why = stream_layout_error(streams[head], codec, m.codecs.residual, tokens, row_bytes);
      if (!why.empty()) {
        throw Error(fmt::format("{}: the {} stream of KV head {} {}", m.spec.to_string(), kind, head, why));
      }
      // Restored codes come from outside the process: checked once here, so that attention
      // never meets codes encode() cannot have written (Codec::check_codes).
      try {
        codec.check_codes(streams[head].codes.data(), streams[head].encoded);
      } catch (const Error& e) {
        throw Error(fmt::format("{}: the {} stream of KV head {}: {}", m.spec.to_string(), kind, head, e.what()));
      }
    }
  }
  m.keys = std::move(keys);
  m.values = std::move(values);
  m.tokens = tokens;
}

}  // namespace veloxquant
