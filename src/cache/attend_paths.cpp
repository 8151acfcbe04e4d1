// The three ways KVCache attends for one KV head's query rows: fused on the codes (decoding),
// decoded once then matrix products (prefill), and the plain reference the others are tested
// against. Each can also report the attention probabilities it computed, which is what the
// eviction policies rank tokens by: no second attention pass.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "cache/kv_cache_impl.h"
#include "core/blas.h"
#include "core/simd.h"

namespace veloxquant {
namespace {

// Per-thread scratch reused across attend calls, so that a long cache does not fault in fresh
// pages for its score rows at every decode step. Slots 4 and 5 belong to KVCache::attend.
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

void add_to(float* mass, const float* p, size_t n) {
  for (size_t t = 0; t < n; ++t) mass[t] += p[t];
}

}  // namespace

float* attend_scratch(size_t slot, size_t n) { return scratch(slot, n); }

void KVCache::Impl::attend_fused(size_t head, const Rows& q, float* out) const {
  const CacheStream& ks = keys[head];
  const CacheStream& vs = values[head];
  const size_t d = shape.head_dim, rows = q.rows, n = stored(head);
  const SplitRows s{scratch(0, rows * ks.encoded), scratch(1, rows * ks.tail_tokens), ks.encoded, n};
  if (ks.encoded) codecs.key->score(q.q, rows, ks.codes.data(), ks.encoded, s.head);
  if (ks.tail_tokens) fp16.score(q.q, rows, ks.tail.data(), ks.tail_tokens, s.tail);
  // Causal softmax in place; masked tokens get weight 0.
  for (size_t r = 0; r < rows; ++r) {
    const size_t visible = n - q.nq + q.first_token + r / q.group + 1;
    const size_t in_head = std::min(visible, s.split), in_tail = visible - in_head;
    float* h = s.head + r * s.split;
    float* t = s.tail + r * (n - s.split);
    simd::softmax(h, in_head, t, in_tail);
    std::fill(h + in_head, h + s.split, 0.0f);
    std::fill(t + in_tail, t + (n - s.split), 0.0f);
    if (q.observed(r)) {
      add_to(q.mass, h, in_head);
      add_to(q.mass + s.split, t, in_tail);
    }
  }
  std::fill(out, out + rows * d, 0.0f);
  // The value stream may split at another token (its block size differs): re-split the weights.
  SplitRows w = s;
  if (vs.encoded != ks.encoded) {
    w = SplitRows{scratch(2, rows * vs.encoded), scratch(3, rows * vs.tail_tokens), vs.encoded, n};
    for (size_t r = 0; r < rows; ++r) {
      s.copy(r, 0, vs.encoded, w.head + r * vs.encoded);
      s.copy(r, vs.encoded, vs.tail_tokens, w.tail + r * vs.tail_tokens);
    }
  }
  if (vs.encoded) codecs.value->accumulate(w.head, rows, vs.codes.data(), vs.encoded, out);
  if (vs.tail_tokens) fp16.accumulate(w.tail, rows, vs.tail.data(), vs.tail_tokens, out);
}

void KVCache::Impl::attend_decoded(size_t head, const Rows& q, float* out) const {
  const size_t d = shape.head_dim, rows = q.rows, n = stored(head);
  // Tokens visible to the last row of this chunk; earlier rows see fewer (causal).
  const size_t visible = n - q.nq + q.first_token + (rows - 1) / q.group + 1;
  float* k = scratch(0, n * d);
  float* v = scratch(1, n * d);
  float* p = scratch(2, rows * visible);
  decode_head(head, k, v);
  configure_blas();
  const auto ri = [](size_t x) { return static_cast<blasint>(x); };
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ri(rows), ri(visible), ri(d), 1.0f, q.q,
              ri(d), k, ri(d), 0.0f, p, ri(visible));
  for (size_t r = 0; r < rows; ++r) {
    const size_t seen = n - q.nq + q.first_token + r / q.group + 1;
    float* row = p + r * visible;
    simd::softmax(row, seen, nullptr, 0);
    std::fill(row + seen, row + visible, 0.0f);
    if (q.observed(r)) add_to(q.mass, row, seen);
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ri(rows), ri(d), ri(visible), 1.0f, p,
              ri(visible), v, ri(d), 0.0f, out, ri(d));
}

void KVCache::Impl::attend_reference(size_t head, const Rows& q, float* out) const {
  const size_t d = shape.head_dim, n = stored(head);
  std::vector<float> k(n * d), v(n * d), logits(n);
  decode_head(head, k.data(), v.data());
  std::fill(out, out + q.rows * d, 0.0f);
  for (size_t r = 0; r < q.rows; ++r) {
    const size_t visible = n - q.nq + q.first_token + r / q.group + 1;
    float mx = -std::numeric_limits<float>::infinity();
    for (size_t t = 0; t < visible; ++t) {
      float dot = 0;
      for (size_t c = 0; c < d; ++c) dot += q.q[r * d + c] * k[t * d + c];
      logits[t] = dot;
      mx = std::max(mx, dot);
    }
    float sum = 0;
    for (size_t t = 0; t < visible; ++t) sum += (logits[t] = std::exp(logits[t] - mx));
    for (size_t t = 0; t < visible; ++t) {
      const float w = logits[t] / sum;
      for (size_t c = 0; c < d; ++c) out[r * d + c] += w * v[t * d + c];
      if (q.observed(r)) q.mass[t] += w;
    }
  }
}

}  // namespace veloxquant
