#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cache/kv_cache_impl.h"
#include "core/parallel.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"
#include "veloxquant/threads.h"

namespace veloxquant {
namespace {

// Query rows per KV head from which AttendPath::Auto decodes once and multiplies matrices
// instead of scoring every query on the codes (measured with veloxquant_bench_runtime).
constexpr size_t kDecodedRows = 16;
// Below this much work per call, attention stays on the calling thread (appends:
// kParallelAppendElements, kv_cache_impl.h).
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
    throw ShapeError(
        fmt::format("layer {} {}: token {} of the append (cache position {}), head {}, channel {} is {}; {}",
                    shape.layer, what, t, first_token + t, i % row / shape.head_dim, i % shape.head_dim, x[i],
                    finite ? "expected |x| <= 65504 (the fp16 range recent tokens are stored in)"
                           : "expected a finite number"));
  }
}

}  // namespace

KVCache::Impl::Impl(Spec s, const LayerShape& sh, std::shared_ptr<CrossLayerCoordinator> coordinator)
    : spec(std::move(s)),
      shape(with_calibration(spec, sh)),
      codecs(spec.method->make(spec.params, shape)),
      fp16(sh.head_dim),
      keys(sh.kv_heads),
      values(sh.kv_heads) {
  pre_rope = spec.method->keys_before_rope;
  rope = sh.rope;
  salient = codecs.key->wants_attention() || codecs.value->wants_attention();
  if (salient) {
    attention.resize(sh.kv_heads);
    attention_rows.resize(sh.kv_heads);
  }
  // Every layer of a cross-layer spec encodes at the end of the step, those outside pairs too,
  // so that all of a model's layers see their own step's tokens in fp16 alike.
  held = salient || spec.method->cross_layer();
  if (spec.method->cross_layer() && spec.eviction) {
    throw SpecError(spec.to_string() + ": " + spec.method->name +
                    " stores adjacent layers' tokens "
                    "together and an eviction policy drops tokens per layer; combining the two is "
                    "not supported: expected a spec without a policy");
  }
  if (coordinator) {
    coordinator->attach(sh.layer, this);
    cross = std::move(coordinator);
    pair = cross->pair_of(sh.layer);
    follower = pair && pair->leader != sh.layer;
  }
  if (!spec.eviction) return;
  if (salient) {
    throw SpecError(spec.to_string() + ": " + spec.method->name +
                    " chooses how to store each "
                    "token by the attention it receives and an eviction policy drops tokens by "
                    "the same attention; combining the two is not supported: expected a spec "
                    "without a policy");
  }
  policy = spec.eviction->make_policy(spec.eviction_params, sh);
  scores.resize(sh.kv_heads);
  sink_keys.resize(sh.kv_heads);
  sink_values.resize(sh.kv_heads);
  // The policy keeps its sinks and the units holding its protected newest tokens whatever they
  // score; an encoded unit can reach a block back from the first protected token.
  const size_t block = std::max(codecs.key->block_tokens(), codecs.value->block_tokens());
  min_budget = policy->sinks() + policy->protected_recent() + block - 1;
  const size_t asked = static_cast<size_t>(spec.eviction_params.get_int("budget"));
  if (asked < min_budget) {
    throw SpecError(
        fmt::format("{}: budget={} is below the {} tokens the policy always keeps ({} sinks + {} protected "
                    "newest + {} for a {}-token block of the quantizer); expected budget >= {}",
                    spec.to_string(), asked, min_budget, policy->sinks(), policy->protected_recent(),
                    block - 1, block, min_budget));
  }
  // A layer's share (pyramidkv's deepest layers) may fall below it: raised, so it can be met.
  policy->set_budget(std::max(policy->budget(), min_budget));
}

KVCache::Impl::~Impl() {
  if (cross) cross->detach(shape.layer, this);
}

KVCache::Impl* KVCache::Impl::partner() const {
  if (!pair) return nullptr;
  return cross->cache(follower ? pair->leader : pair->leader + 1);
}

void KVCache::Impl::push(CacheStream& s, const float* rows, size_t n, size_t stride) const {
  const size_t row_bytes = fp16.code_bytes(1), old = s.tail.size();
  s.tail.resize(old + n * row_bytes);
  for (size_t t = 0; t < n; ++t) fp16.encode(rows + t * stride, 1, s.tail.data() + old + t * row_bytes);
  s.tail_tokens += n;
}

size_t KVCache::Impl::held_bytes() const {
  const auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  size_t n = 0;
  for (const std::vector<CacheStream>* streams : {&keys, &values})
    for (const CacheStream& s : *streams) n += bytes(s.state) + bytes(s.codes) + bytes(s.tail);
  for (const TokenScores& s : scores) n += bytes(s.score) + bytes(s.position);
  for (const auto* rows : {&sink_keys, &sink_values})
    for (const auto& r : *rows) n += bytes(r);
  for (const auto* rows : {&attention, &attention_rows})
    for (const auto& r : *rows) n += bytes(r);
  return n;
}

size_t KVCache::Impl::observed_queries(size_t nq) const {
  return policy ? policy->observed_queries(nq, prompt_step) : salient ? nq : 0;
}

size_t KVCache::Impl::stream_bytes(bool is_key) const {
  size_t b = 0;
  std::vector<const Codec*> counted;
  for (size_t head = 0; head < shape.kv_heads; ++head) {
    const Codec* c = &head_codec(is_key, head);
    if (std::find(counted.begin(), counted.end(), c) != counted.end()) continue;
    counted.push_back(c);
    b += c->state_bytes();
  }
  for (const auto& s : is_key ? keys : values) b += s.state.size() + s.codes.size() + s.tail.size();
  for (const auto& s : is_key ? sink_keys : sink_values) b += s.size();
  return b;
}

KVCache::Impl::Encoded KVCache::Impl::encoded(size_t head, bool is_key) const {
  const CacheStream& s = (is_key ? keys : values)[head];
  if (!pair) return {is_key ? &key_codec(head) : &value_codec(head), s.codes.data()};
  const PairCodec& codec = pair_codec(is_key);
  if (s.encoded == 0) return {&codec.view_codec(), nullptr};
  thread_local std::vector<uint8_t> scratch[2];
  std::vector<uint8_t>& buffer = scratch[is_key ? 0 : 1];
  if (!follower) return {&codec.view_codec(), codec.view(false, s.codes.data(), nullptr, s.encoded, buffer)};
  const Impl* lead = partner();
  const size_t lead_encoded = lead ? (is_key ? lead->keys : lead->values)[head].encoded : 0;
  if (lead_encoded != s.encoded) {
    throw Error(fmt::format("{}: layer {} reads its encoded tokens through layer {}, which {}; "
                            "expected {} encoded tokens in KV head {} there",
                            spec.to_string(), shape.layer, pair->leader,
                            lead ? fmt::format("holds {}", lead_encoded) : std::string("no longer exists"),
                            s.encoded, head));
  }
  const CacheStream& ls = (is_key ? lead->keys : lead->values)[head];
  return {&codec.view_codec(), codec.view(true, ls.codes.data(), s.codes.data(), s.encoded, buffer)};
}

void KVCache::Impl::decode_stream(const CacheStream& s, const Encoded& e, float* out) const {
  if (s.encoded) e.codec->decode(e.codes, s.encoded, out);  // a codec fitted per stream may not be yet
  fp16.decode(s.tail.data(), s.tail_tokens, out + s.encoded * shape.head_dim);
}

void KVCache::Impl::decode_head(size_t head, float* k, float* v) const {
  decode_side(head, true, nullptr, k);
  decode_side(head, false, nullptr, v);
}

void KVCache::Impl::decode_side(size_t head, bool keys_wanted, const Codec* basis, float* x) const {
  const size_t d = shape.head_dim;
  const CacheStream& s = keys_wanted ? keys[head] : values[head];
  if (sinks && keys_wanted) rotated_sink_keys(head, x);
  else if (sinks) fp16.decode(sink_values[head].data(), sinks, x);
  float* stream = x + sinks * d;
  if (basis == nullptr) {
    decode_stream(s, encoded(head, keys_wanted), stream);
    if (keys_wanted) rotate_stream_keys(head, stream);
    return;
  }
  basis->decode_in_basis(encoded(head, keys_wanted).codes, s.encoded, stream);
  float* tail = stream + s.encoded * d;
  fp16.decode(s.tail.data(), s.tail_tokens, tail);
  basis->to_basis(x, sinks);
  basis->to_basis(tail, s.tail_tokens);
}

std::vector<float> KVCache::Impl::decode_all(bool keys_wanted) const {
  const size_t d = shape.head_dim, h = shape.kv_heads, n = stored(0);
  for (size_t k = 1; k < h; ++k) {
    if (stored(k) != n) {
      throw Error(fmt::format("{}: KV head {} keeps {} tokens and head 0 keeps {}; a [tokens, "
                              "heads, dim] array needs the same count in every head",
                              spec.to_string(), k, stored(k), n));
    }
  }
  std::vector<float> out(n * h * d), kh(n * d), vh(n * d);
  for (size_t k = 0; k < h; ++k) {
    decode_head(k, kh.data(), vh.data());
    const std::vector<float>& head = keys_wanted ? kh : vh;
    for (size_t t = 0; t < n; ++t) std::copy_n(head.data() + t * d, d, out.data() + (t * h + k) * d);
  }
  return out;
}

KVCache::KVCache(std::string_view spec, const LayerShape& shape) : KVCache(parse_spec(spec), shape) {}

KVCache::KVCache(Spec spec, const LayerShape& shape) : KVCache(std::move(spec), shape, nullptr) {}

KVCache::KVCache(Spec spec, const LayerShape& shape, std::shared_ptr<CrossLayerCoordinator> cross) {
  if (spec.method == nullptr) throw SpecError("KVCache needs a parsed spec");
  if (shape.kv_heads == 0 || shape.head_dim == 0) {
    throw ShapeError("layer shape kv_heads=" + std::to_string(shape.kv_heads) +
                     " head_dim=" + std::to_string(shape.head_dim) + "; expected both >= 1");
  }
  impl_ = std::make_unique<Impl>(std::move(spec), shape, std::move(cross));
  if (impl_->codecs.key->dim() != shape.head_dim || impl_->codecs.value->dim() != shape.head_dim) {
    throw Error(impl_->spec.to_string() + ": codec dimension differs from head_dim " +
                std::to_string(shape.head_dim));
  }
  for (const auto* own : {&impl_->codecs.head_keys, &impl_->codecs.head_values}) {
    if (!own->empty() && own->size() != shape.kv_heads) {
      throw Error(fmt::format("{}: {} per-head codecs for {} KV heads; expected one per head",
                              impl_->spec.to_string(), own->size(), shape.kv_heads));
    }
  }
}

KVCache::~KVCache() = default;
KVCache::KVCache(KVCache&&) noexcept = default;
KVCache& KVCache::operator=(KVCache&&) noexcept = default;

void KVCache::append(const TensorView& k, const TensorView& v) { append_checked(k, v, {}, nullptr); }

void KVCache::append(const TensorView& k, const TensorView& v, std::span<const int64_t> positions,
                     const RopeParams& rope) {
  if (k.rank >= 1 && positions.size() != k.dim(0)) {
    throw ShapeError("append got " + std::to_string(positions.size()) + " positions for " +
                     std::to_string(k.dim(0)) + " key tokens; expected one per token");
  }
  append_checked(k, v, positions, &rope);
}

void KVCache::append_checked(const TensorView& k, const TensorView& v, std::span<const int64_t> positions,
                             const RopeParams* rope) {
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
  const size_t n = k.dim(0), row = h * d;
  // The sequence's first tokens become the policy's sinks while there are sinks to fill: they
  // keep their keys before RoPE, to be rotated to their cache positions at attend time.
  const size_t sinks = m.policy && m.tokens < m.policy->sinks() ? std::min(n, m.policy->sinks() - m.tokens)
                                                                : 0;
  // A method that stores keys before RoPE (MethodInfo::keys_before_rope) gets them all as they
  // come, rotated when they are read; without a policy a token's position is its index in the
  // cache (stream_position), so the positions must count on from the tokens held.
  const size_t unrotated = m.pre_rope ? n : sinks;
  if (rope && m.pre_rope) {
    for (size_t t = 0; t < n && !m.policy; ++t) {
      if (positions[t] != static_cast<int64_t>(m.tokens + t)) {
        throw ShapeError(fmt::format("{}: token {} of the append has position {}; this cache stores "
                                     "keys before RoPE and rotates token i to position i, so "
                                     "expected {}",
                                     m.spec.to_string(), t, positions[t], m.tokens + t));
      }
    }
    m.rope = m.shape.rope = *rope;  // shape() then tells save_caches the keys need it
  }
  if (rope && unrotated < n) {
    for (size_t t = unrotated; t < n; ++t) apply_rope(*rope, kf.data() + t * row, h, d, positions[t]);
    // RoPE keeps each pair's norm but may move a value near the fp16 limit past it.
    check_storable(kf, "keys after RoPE", m.shape, m.tokens);
  }
  // Held blocks are encoded before new tokens arrive: their step's queries have attended.
  if (m.held) m.encode_all_aged();
  parallel_for(
      h,
      [&](size_t head) {
        if (sinks) {
          for (size_t t = 0; t < sinks; ++t) {
            const size_t at = m.sink_keys[head].size(), bytes = m.fp16.code_bytes(1);
            m.sink_keys[head].resize(at + bytes);
            m.sink_values[head].resize(at + bytes);
            m.fp16.encode(kf.data() + t * row + head * d, 1, m.sink_keys[head].data() + at);
            m.fp16.encode(vf.data() + t * row + head * d, 1, m.sink_values[head].data() + at);
          }
        }
        if (n > sinks) {
          m.push(m.keys[head], kf.data() + sinks * row + head * d, n - sinks, row);
          m.push(m.values[head], vf.data() + sinks * row + head * d, n - sinks, row);
        }
      },
      n * row >= kParallelAppendElements);
  m.sinks += sinks;
  if (m.salient) {
    for (size_t head = 0; head < h; ++head) {
      m.attention[head].resize(m.attention[head].size() + n, 0.0f);
      m.attention_rows[head].resize(m.attention_rows[head].size() + n, 0.0f);
    }
  }
  if (!m.held) m.encode_all_aged();
  if (m.policy) {
    for (TokenScores& s : m.scores) {
      s.score.resize(s.score.size() + n, 0.0f);
      for (size_t t = 0; t < n; ++t)
        s.position.push_back(rope ? positions[t] : static_cast<int64_t>(m.tokens + t));
    }
    if (rope) m.rope = *rope;
    m.last_position = m.scores.front().position.back();
    m.pending += n;
  }
  m.tokens += n;
  m.note_held();
}

void KVCache::attend(const TensorView& q, float* out, AttendPath path) const {
  attend_into(q, out, path, nullptr);
}

void KVCache::attend_observed(const TensorView& q, float* out) {
  Impl& m = *impl_;
  if (!m.policy && !m.salient && !m.recording_peaks) return attend_into(q, out, AttendPath::Auto, nullptr);
  std::vector<std::vector<float>> mass;
  const size_t observed = q.rank != 3 ? 0 : m.recording_peaks ? q.dim(0) : m.observed_queries(q.dim(0));
  if (observed) {
    mass.resize(m.shape.kv_heads);
    for (size_t h = 0; h < mass.size(); ++h) mass[h].assign(m.stored(h), 0.0f);
  }
  attend_into(q, out, AttendPath::Auto, observed ? &mass : nullptr, m.recording_peaks);
  if (m.recording_peaks) {
    m.peaks.resize(mass.size());
    for (size_t h = 0; h < mass.size(); ++h) {
      m.peaks[h].resize(mass[h].size(), 0.0f);
      for (size_t t = 0; t < mass[h].size(); ++t) m.peaks[h][t] = std::max(m.peaks[h][t], mass[h][t]);
    }
    return;  // recorded on a plain cache only: no policy or saliency to tell
  }
  if (m.policy && m.policy->reads_contents()) {
    // The queries belong to the newest tokens, whose positions every head holds last.
    const std::vector<int64_t>& positions = m.scores.front().position;
    const std::vector<float> qf = to_f32_checked(q, "queries");
    m.policy->observe_queries(qf.data(), q.dim(0), q.dim(1), positions.data() + positions.size() - q.dim(0),
                              m.rope);
  }
  if (m.policy) m.policy->observe(mass, m.scores, m.prompt_step);
  else if (observed) m.note_attention(mass, q.dim(0), q.dim(1) / m.shape.kv_heads);
}

void KVCache::attend_into(const TensorView& q, float* out, AttendPath path,
                          std::vector<std::vector<float>>* mass, bool peak) const {
  const Impl& m = *impl_;
  const size_t h = m.shape.kv_heads, d = m.shape.head_dim;
  if (q.rank != 3 || q.dim(2) != d || q.dim(1) == 0 || q.dim(1) % h != 0) {
    throw ShapeError("queries have shape " + q.shape_string() + "; expected [n, q_heads, " +
                     std::to_string(d) + "] with q_heads a multiple of kv_heads " + std::to_string(h));
  }
  size_t fewest = m.stored(0), most = fewest;
  for (size_t head = 1; head < h; ++head) {
    fewest = std::min(fewest, m.stored(head));
    most = std::max(most, m.stored(head));
  }
  const size_t nq = q.dim(0), qh = q.dim(1), group = qh / h;
  if (nq == 0 || nq > fewest) {
    throw ShapeError("attend got " + std::to_string(nq) + " query tokens with " + std::to_string(fewest) +
                     " cached; expected 1.." + std::to_string(fewest));
  }
  const std::vector<float> qf = to_f32_checked(q, "queries");
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  // Bound the score matrix of one head to kScoreFloats by processing query tokens in chunks.
  const size_t chunk = std::max<size_t>(1, kScoreFloats / (group * most));
  const auto chunk_path = [&](size_t rows) {
    if (path != AttendPath::Auto) return path;
    return rows >= kDecodedRows ? AttendPath::Decoded : AttendPath::Fused;
  };
  // The decoded path decodes the whole stream per call, and chunks itself: with a head for every
  // thread, one call per head then decodes each stream once rather than once per chunk.
  const bool whole_heads = chunk_path(chunk * group) == AttendPath::Decoded &&
                           h >= static_cast<size_t>(threads());
  const size_t per_job = whole_heads ? nq : chunk, chunks = (nq + per_job - 1) / per_job;
  const size_t observed_from = !mass ? nq : peak ? 0 : nq - m.observed_queries(nq);
  // Each job adds its rows' probabilities into a buffer of its own; summed per head afterwards.
  std::vector<std::vector<float>> job_mass(mass ? h * chunks : 0);
  parallel_for(
      h * chunks,
      [&](size_t job) {
        const size_t head = job / chunks, i0 = job % chunks * per_job;
        const size_t ni = std::min(per_job, nq - i0), rows = ni * group;
        float* qs = attend_scratch(4, rows * d);
        float* o = attend_scratch(5, rows * d);
        for (size_t i = 0; i < ni; ++i)
          for (size_t g = 0; g < group; ++g)
            for (size_t c = 0; c < d; ++c)
              qs[(i * group + g) * d + c] = qf[((i0 + i) * qh + head * group + g) * d + c] * scale;
        float* job_rows_mass = nullptr;
        if (mass && i0 + ni > observed_from) {
          job_mass[job].assign(m.stored(head), 0.0f);
          job_rows_mass = job_mass[job].data();
        }
        const Impl::Rows r{qs, rows, group, i0, nq, job_rows_mass, observed_from, peak};
        const AttendPath p = chunk_path(rows);
        if (p == AttendPath::Fused) m.attend_fused(head, r, o);
        else if (p == AttendPath::Decoded) m.attend_decoded(head, r, o);
        else m.attend_reference(head, r, o);
        for (size_t i = 0; i < ni; ++i)
          for (size_t g = 0; g < group; ++g)
            std::copy_n(o + (i * group + g) * d, d, out + ((i0 + i) * qh + head * group + g) * d);
      },
      nq * qh * most * d >= kParallelAttendMacs);
  for (size_t job = 0; job < job_mass.size(); ++job) {
    std::vector<float>& into = (*mass)[job / chunks];
    for (size_t t = 0; t < job_mass[job].size(); ++t)
      into[t] = peak ? std::max(into[t], job_mass[job][t]) : into[t] + job_mass[job][t];
  }
}

void KVCache::evict() { impl_->evict(); }
void KVCache::finish_step() {
  if (impl_->held) impl_->encode_all_aged();
  impl_->note_held();  // encoded blocks beside the tail rows they came from, before any eviction
  impl_->evict();
  impl_->drop_outside_window();
  impl_->prompt_step = {};
}
void KVCache::continue_prompt(size_t rest) { impl_->prompt_step = {true, rest}; }
size_t KVCache::held_bytes() const { return impl_->held_bytes(); }
size_t KVCache::peak_held_bytes() const { return std::max(impl_->held_peak, impl_->held_bytes()); }
bool KVCache::evicts() const { return impl_->policy != nullptr; }
bool KVCache::scores_by_reconstruction() const {
  return impl_->policy && impl_->policy->scores_by_reconstruction();
}
void KVCache::set_reconstruction_scores(std::vector<std::vector<float>> by_position,
                                        std::vector<size_t> head_budgets) {
  if (impl_->policy)
    impl_->policy->set_reconstruction_scores(std::move(by_position), std::move(head_budgets));
}
void KVCache::record_attention_peaks(bool on) {
  if (on && (impl_->policy || impl_->salient)) {
    throw Error("record_attention_peaks: the cache is '" + impl_->spec.to_string() +
                "', which evicts or ranks tokens by attention; expected a plain cache, whose stored "
                "token t is position t");
  }
  impl_->recording_peaks = on;
  if (on) impl_->peaks.clear();
}
const std::vector<std::vector<float>>& KVCache::attention_peaks() const { return impl_->peaks; }
bool KVCache::cross_layer() const { return impl_->cross != nullptr; }
bool KVCache::wants_layer_importance() const {
  return impl_->policy && impl_->policy->wants_layer_importance();
}
size_t KVCache::budget() const { return impl_->policy ? impl_->policy->budget() : 0; }
void KVCache::set_budget(size_t tokens) {
  if (!impl_->policy) throw Error(impl_->spec.to_string() + " evicts nothing; it has no budget to set");
  impl_->policy->set_budget(std::max(tokens, impl_->min_budget));
}
size_t KVCache::stored_tokens(size_t head) const { return impl_->stored(head); }
std::vector<int64_t> KVCache::positions(size_t head) const {
  const Impl& m = *impl_;
  if (m.policy) return m.scores[head].position;
  std::vector<int64_t> all(m.tokens - m.dropped);
  for (size_t t = 0; t < all.size(); ++t) all[t] = static_cast<int64_t>(m.dropped + t);
  return all;
}

size_t KVCache::tokens() const { return impl_->tokens; }
size_t KVCache::kv_heads() const { return impl_->shape.kv_heads; }
size_t KVCache::head_dim() const { return impl_->shape.head_dim; }
size_t KVCache::key_bytes() const { return impl_->stream_bytes(true); }
size_t KVCache::value_bytes() const { return impl_->stream_bytes(false); }
size_t KVCache::fp16_bytes() const { return 2 * 2 * impl_->tokens * kv_heads() * head_dim(); }
std::vector<float> KVCache::decode_keys() const { return impl_->decode_all(true); }
std::vector<float> KVCache::decode_values() const { return impl_->decode_all(false); }
const Spec& KVCache::spec() const { return impl_->spec; }
const LayerShape& KVCache::shape() const { return impl_->shape; }
const std::vector<CacheStream>& KVCache::key_streams() const { return impl_->keys; }
const std::vector<CacheStream>& KVCache::value_streams() const { return impl_->values; }
bool KVCache::states_from_spec() const {
  const Codec &k = *impl_->codecs.key, &v = *impl_->codecs.value;
  return (!k.fits_streams() || k.states_from_spec()) && (!v.fits_streams() || v.states_from_spec());
}

}  // namespace veloxquant
