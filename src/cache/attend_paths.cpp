// The three ways KVCache attends for one KV head's query rows: fused on the codes (decoding),
// decoded once then matrix products (prefill), and the plain reference the others are tested
// against. Each can also report the attention probabilities it computed, which is what the
// eviction policies rank tokens by: no second attention pass.
#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "cache/kv_cache_impl.h"
#include "core/blas.h"
#include "core/rope_run.h"
#include "core/simd.h"

namespace veloxquant {
namespace {

// Per-thread scratch reused across attend calls, so that a long cache does not fault in fresh
// pages for its score rows at every decode step. Slots 4 and 5 belong to KVCache::attend.
float* scratch(size_t slot, size_t n) {
  thread_local std::vector<float> buffers[9];
  if (buffers[slot].size() < n) buffers[slot].resize(n);
  return buffers[slot].data();
}

// Score rows of one KV head in two segments, without copying what the codecs wrote: `head`
// ([rows][split]) holds the encoded tokens; `tail` ([rows][tail_width]) holds the sinks, then the
// fp16 tail. A prefix of the cache order (sinks, encoded, tail) that a query sees is then a prefix
// of each segment.
struct ScoreRows {
  float* head;
  float* tail;
  size_t split, sinks, tail_width;
  // Copies row r's stream columns [from, from + n) (stream order: encoded, then tail) to dst.
  void copy_stream(size_t r, size_t from, size_t n, float* dst) const {
    const size_t in_head = from < split ? std::min(n, split - from) : 0;
    // head is null while no token is encoded: no offset from it then.
    if (in_head > 0) std::copy_n(head + r * split + from, in_head, dst);
    if (n > in_head) {
      std::copy_n(tail + r * tail_width + sinks + (from + in_head - split), n - in_head, dst + in_head);
    }
  }
};

// codec.accumulate() over the tokens some row gives weight, their records gathered, when they are
// under half the stream: what a key codec that selects tokens leaves of it. REQUIRES: one token
// per record.
void accumulate_read(const Codec& codec, const float* w, size_t rows, const uint8_t* codes, size_t n,
                     float* out) {
  // Branch-free: which tokens have weight follows no pattern.
  std::vector<uint8_t> weighed(n, 0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t t = 0; t < n; ++t) weighed[t] |= static_cast<uint8_t>(w[r * n + t] != 0.0f);
  std::vector<size_t> read(n);
  size_t m = 0;
  for (size_t t = 0; t < n; ++t) {
    read[m] = t;
    m += weighed[t];
  }
  if (2 * m > n) return codec.accumulate(w, rows, codes, n, out);
  const size_t stride = codec.code_bytes(1);
  std::vector<uint8_t> gathered(m * stride);
  std::vector<float> weights(rows * m);
  for (size_t k = 0; k < m; ++k) {
    std::copy_n(codes + read[k] * stride, stride, &gathered[k * stride]);
    for (size_t r = 0; r < rows; ++r) weights[r * m + k] = w[r * n + read[k]];
  }
  if (m) codec.accumulate(weights.data(), rows, gathered.data(), m, out);
}

// Consecutive stored tokens [first, first + count) whose rows are read in their first `width`
// columns.
struct Segment {
  size_t first, count, width;
};

template <class Rows>  // KVCache::Impl::Rows, which is private
void add_to(const Rows& q, size_t first, const float* p, size_t n) {
  for (size_t t = 0; t < n; ++t) q.note(first + t, p[t]);
}

}  // namespace

float* attend_scratch(size_t slot, size_t n) { return scratch(slot, n); }

size_t KVCache::Impl::window_start(size_t head, size_t visible) const {
  const size_t w = shape.window;
  if (w == 0) return 0;
  // Without a policy the stored tokens are consecutive positions; with one, positions ascend in
  // cache order, so the window is a suffix of what the query sees.
  if (!policy) return visible > w ? visible - w : 0;
  const std::vector<int64_t>& pos = scores[head].position;
  const int64_t first = pos[visible - 1] - static_cast<int64_t>(w) + 1;
  return static_cast<size_t>(std::lower_bound(pos.begin(), pos.begin() + static_cast<std::ptrdiff_t>(visible), first) -
                             pos.begin());
}

void KVCache::Impl::cap_scores(float* s, size_t n) const {
  const float cap = shape.softcap;
  if (cap == 0.0f) return;
  for (size_t i = 0; i < n; ++i)
    if (s[i] != kExcluded) s[i] = cap * std::tanh(s[i] / cap);
}

void KVCache::Impl::exclude_unselected(size_t head, const Rows& q, float* p, size_t width) const {
  const size_t enc = keys[head].encoded;
  if (enc == 0 || pre_rope) return;
  const Encoded e = encoded(head, true);
  if (!e.codec->selects_tokens()) return;
  std::vector<uint8_t> keep(q.rows * enc);
  e.codec->select(q.q, q.rows, e.codes, enc, keep.data());
  const size_t n = width > sinks ? std::min(enc, width - sinks) : 0;
  for (size_t r = 0; r < q.rows; ++r)
    for (size_t t = 0; t < n; ++t)
      if (!keep[r * enc + t]) p[r * width + sinks + t] = kExcluded;
}

void KVCache::Impl::rotated_sink_keys(size_t head, float* k) const {
  const size_t d = shape.head_dim;
  fp16.decode(sink_keys[head].data(), sinks, k);
  // Cache position i for sink i, counted back from the newest token at last_position: every query
  // then sees the sinks right before the window (streaming_llm.cpp).
  const int64_t first = last_position - static_cast<int64_t>(stored(head)) + 1;
  for (size_t i = 0; i < sinks; ++i) apply_rope(rope, k + i * d, 1, d, first + static_cast<int64_t>(i));
}

void KVCache::Impl::rotate_stream_keys(size_t head, float* k) const {
  if (!pre_rope || rope.dims == 0) return;  // dims 0: appended without RoPE, nothing to rotate
  const size_t d = shape.head_dim, n = keys[head].encoded + keys[head].tail_tokens;
  // Without a policy the positions are consecutive: one run, no cosine and sine per pair and token.
  if (!policy) return apply_rope_run(rope, k, n, d, static_cast<int64_t>(dropped));
  for (size_t j = 0; j < n; ++j) apply_rope(rope, k + j * d, 1, d, stream_position(head, j));
}

void KVCache::Impl::attend_fused(size_t head, const Rows& q, float* out) const {
  const CacheStream& ks = keys[head];
  const CacheStream& vs = values[head];
  const size_t d = shape.head_dim, rows = q.rows, n = stored(head);
  const size_t enc = ks.encoded, tail = ks.tail_tokens, width = sinks + tail;
  const ScoreRows s{scratch(0, rows * enc), scratch(1, rows * width), enc, sinks, width};
  bool selective = false;  // the key codec let each row read only some tokens (Codec::select)
  if (pre_rope) {
    // Keys stored before RoPE: decoded, rotated to their positions, then scored. Scoring the
    // codes straight would need the rotation per token inside the codec.
    const size_t n_stream = enc + tail;
    float* k = scratch(7, n_stream * d);
    float* all = scratch(8, rows * n_stream);
    decode_stream(ks, encoded(head, true), k);
    rotate_stream_keys(head, k);
    simd::dot_f32_rows(q.q, rows, k, n_stream, d, all);
    for (size_t r = 0; r < rows; ++r) {
      std::copy_n(all + r * n_stream, enc, s.head + r * enc);
      std::copy_n(all + r * n_stream + enc, tail, s.tail + r * width + sinks);
    }
  } else {
    if (enc) {
      const Encoded e = encoded(head, true);
      e.codec->score(q.q, rows, e.codes, enc, s.head);
      selective = e.codec->selects_tokens();
    }
    if (tail && sinks == 0) {
      fp16.score(q.q, rows, ks.tail.data(), tail, s.tail);
    } else if (tail) {
      float* part = scratch(2, rows * tail);
      fp16.score(q.q, rows, ks.tail.data(), tail, part);
      for (size_t r = 0; r < rows; ++r) std::copy_n(part + r * tail, tail, s.tail + r * width + sinks);
    }
  }
  if (sinks) {
    // Sinks are few: their rotated keys' scores go first in each row, before the tail's.
    float* k = scratch(2, sinks * d);
    float* part = scratch(3, rows * sinks);
    rotated_sink_keys(head, k);
    simd::dot_f32_rows(q.q, rows, k, sinks, d, part);
    for (size_t r = 0; r < rows; ++r) std::copy_n(part + r * sinks, sinks, s.tail + r * width);
  }
  // Causal (and windowed) softmax in place; masked tokens get weight 0.
  for (size_t r = 0; r < rows; ++r) {
    const size_t visible = n - q.nq + q.first_token + r / q.group + 1;
    const size_t in_sinks = std::min(visible, sinks), in_head = std::min(visible - in_sinks, enc);
    const size_t in_tail = visible - in_sinks - in_head;
    // The window's start cuts the cache order (sinks, encoded, tail) in one segment: what it
    // masks of the encoded part, and where the visible part of the tail row begins.
    const size_t lo = window_start(head, visible);
    const size_t masked_head = lo > sinks ? std::min(lo - sinks, enc) : 0;
    const size_t tail_from = lo > sinks + enc ? lo - enc : std::min(lo, sinks);
    float* h = s.head + r * enc;
    float* t = s.tail + r * width;
    cap_scores(h + masked_head, in_head - masked_head);
    cap_scores(t + tail_from, in_sinks + in_tail - tail_from);
    simd::softmax(h + masked_head, in_head - masked_head, t + tail_from, in_sinks + in_tail - tail_from);
    std::fill(h, h + masked_head, 0.0f);
    std::fill(h + in_head, h + enc, 0.0f);
    std::fill(t, t + tail_from, 0.0f);
    std::fill(t + in_sinks + in_tail, t + width, 0.0f);
    if (q.observed(r)) {
      add_to(q, 0, t, in_sinks);
      add_to(q, sinks, h, in_head);
      add_to(q, sinks + enc, t + sinks, in_tail);
    }
  }
  std::fill(out, out + rows * d, 0.0f);
  // The value stream may split at another token (its block size differs), and the sinks sit in
  // the second segment: then the weights are regathered in the value stream's layout.
  const size_t venc = vs.encoded, vtail = vs.tail_tokens;
  const float* wh = s.head;
  const float* wt = s.tail;
  if (venc != enc || sinks) {
    float* gh = scratch(2, rows * venc);
    float* gt = scratch(3, rows * vtail);
    for (size_t r = 0; r < rows; ++r) {
      s.copy_stream(r, 0, venc, gh + r * venc);
      s.copy_stream(r, venc, vtail, gt + r * vtail);
    }
    wh = gh;
    wt = gt;
  }
  if (venc) {
    const Encoded e = encoded(head, false);
    if (selective && e.codec->block_tokens() == 1 && !e.codec->variable_length()) {
      accumulate_read(*e.codec, wh, rows, e.codes, venc, out);
    } else {
      e.codec->accumulate(wh, rows, e.codes, venc, out);
    }
  }
  if (vtail) fp16.accumulate(wt, rows, vs.tail.data(), vtail, out);
  if (sinks) {
    float* ws = scratch(6, rows * sinks);
    for (size_t r = 0; r < rows; ++r) std::copy_n(s.tail + r * width, sinks, ws + r * sinks);
    fp16.accumulate(ws, rows, sink_values[head].data(), sinks, out);
  }
}

const Codec* KVCache::Impl::prefill_basis(size_t head, bool keys_wanted) const {
  const CacheStream& s = keys_wanted ? keys[head] : values[head];
  if (s.encoded == 0 || (keys_wanted && pre_rope)) return nullptr;
  // The codec alone: encoded() would build a pair's view of the codes only to be built again.
  const Codec* codec = pair          ? &pair_codec(keys_wanted).view_codec()
                       : keys_wanted ? &key_codec(head)
                                     : &value_codec(head);
  return codec->decodes_in_basis() ? codec : nullptr;
}

void KVCache::Impl::attend_decoded(size_t head, const Rows& q, float* out) const {
  const size_t d = shape.head_dim, n = stored(head);
  float* k = scratch(0, n * d);
  float* v = scratch(1, n * d);
  // In a codec's own basis the queries and outputs are rotated once per row, not every token.
  const Codec* key_basis = prefill_basis(head, true);
  const Codec* value_basis = prefill_basis(head, false);
  decode_side(head, true, key_basis, k);
  decode_side(head, false, value_basis, v);
  const float* queries = q.q;
  if (key_basis) {
    float* rotated = scratch(3, q.rows * d);
    std::copy_n(q.q, q.rows * d, rotated);
    key_basis->queries_to_basis(rotated, q.rows);
    queries = rotated;
  }
  configure_blas();
  const auto ri = [](size_t x) { return static_cast<blasint>(x); };
  // The encoded tokens of a low-rank codec take only their basis_width() columns; the sinks and
  // the fp16 tail every column.
  const auto segments = [&](const Codec* basis, size_t encoded, size_t visible) {
    const size_t width = basis ? basis->basis_width() : d;
    std::array<Segment, 3> seg{Segment{0, sinks, d}, Segment{sinks, encoded, width},
                               Segment{sinks + encoded, n - sinks - encoded, d}};
    for (Segment& g : seg) g.count = g.first < visible ? std::min(g.count, visible - g.first) : 0;
    return seg;
  };
  // Query tokens per chunk, so that a chunk's scores stay within kScoreFloats.
  const size_t per_chunk = std::max<size_t>(1, kScoreFloats / (q.group * n));
  for (size_t t0 = 0; t0 * q.group < q.rows; t0 += per_chunk) {
    Rows c = q;
    c.q = q.q + t0 * q.group * d;
    c.first_token = q.first_token + t0;
    c.rows = std::min(per_chunk * q.group, q.rows - t0 * q.group);
    const float* cq = queries + t0 * q.group * d;
    float* co = out + t0 * q.group * d;
    const size_t rows = c.rows;
    // Tokens visible to the last row of this chunk; earlier rows see fewer (causal).
    const size_t visible = n - c.nq + c.first_token + (rows - 1) / c.group + 1;
    float* p = scratch(2, rows * visible);
    if (key_basis == nullptr || key_basis->basis_width() == d) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ri(rows), ri(visible), ri(d), 1.0f, cq, ri(d), k,
                  ri(d), 0.0f, p, ri(visible));
    } else {
      for (const Segment& g : segments(key_basis, keys[head].encoded, visible)) {
        if (g.count == 0) continue;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ri(rows), ri(g.count), ri(g.width), 1.0f, cq,
                    ri(d), k + g.first * d, ri(d), 0.0f, p + g.first, ri(visible));
      }
    }
    exclude_unselected(head, c, p, visible);
    for (size_t r = 0; r < rows; ++r) {
      const size_t seen = n - c.nq + c.first_token + r / c.group + 1, lo = window_start(head, seen);
      float* row = p + r * visible;
      cap_scores(row + lo, seen - lo);
      simd::softmax(row + lo, seen - lo, nullptr, 0);
      std::fill(row, row + lo, 0.0f);
      std::fill(row + seen, row + visible, 0.0f);
      if (c.observed(r)) add_to(c, 0, row, seen);
    }
    if (value_basis == nullptr || value_basis->basis_width() == d) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ri(rows), ri(d), ri(visible), 1.0f, p,
                  ri(visible), v, ri(d), 0.0f, co, ri(d));
    } else {
      std::fill_n(co, rows * d, 0.0f);
      for (const Segment& g : segments(value_basis, values[head].encoded, visible)) {
        if (g.count == 0) continue;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ri(rows), ri(g.width), ri(g.count), 1.0f,
                    p + g.first, ri(visible), v + g.first * d, ri(d), 1.0f, co, ri(d));
      }
    }
  }
  if (value_basis) value_basis->from_basis(out, q.rows);
}

void KVCache::Impl::attend_reference(size_t head, const Rows& q, float* out) const {
  const size_t d = shape.head_dim, n = stored(head);
  std::vector<float> k(n * d), v(n * d), logits(n), excluded(q.rows * n, 0.0f);
  decode_head(head, k.data(), v.data());
  exclude_unselected(head, q, excluded.data(), n);
  std::fill(out, out + q.rows * d, 0.0f);
  for (size_t r = 0; r < q.rows; ++r) {
    const size_t visible = n - q.nq + q.first_token + r / q.group + 1, lo = window_start(head, visible);
    float mx = -std::numeric_limits<float>::infinity();
    for (size_t t = lo; t < visible; ++t) {
      float dot = 0;
      for (size_t c = 0; c < d; ++c) dot += q.q[r * d + c] * k[t * d + c];
      cap_scores(&dot, 1);
      if (excluded[r * n + t] == kExcluded) dot = kExcluded;
      logits[t] = dot;
      mx = std::max(mx, dot);
    }
    float sum = 0;
    for (size_t t = lo; t < visible; ++t) sum += (logits[t] = std::exp(logits[t] - mx));
    for (size_t t = lo; t < visible; ++t) {
      const float w = logits[t] / sum;
      for (size_t c = 0; c < d; ++c) out[r * d + c] += w * v[t * d + c];
      if (q.observed(r)) q.note(t, w);
    }
  }
}

}  // namespace veloxquant
