// DeviceCache: the streams' device memory, the per-call plans (which tokens the codes hold, how the
// sequence is split) and the launches. What differs between families is the device format's
// (device_format.h): code sizes, tables, kernels; the kernels live in the family folders.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>

#include "cuda/attention/launchers.h"
#include "cuda/attention/split_decode.cuh"
#include "cuda/cache/config_rules.h"
#include "cuda/cache/device_format.h"
#include "cuda/common/check.cuh"
#include "cuda/common/device_array.cuh"
#include "cuda/eviction/sink_partial.h"
#include "cuda/eviction/streaming_cut.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

// Tokens of codes one stream keeps (`cap` tokens whole, in `unit`s: every block and tile). A
// windowed layer whose appends are bounded needs only what one step's queries can see: its window
// (or an evicting cache's budget) and the append, with a unit of room on either side for the
// tiles and blocks they straddle.
size_t code_span(const CacheConfig& c, size_t cap, size_t unit) {
  const size_t seen = c.window > 0 ? c.window : c.budget;
  if (seen == 0 || c.max_append == 0) return cap;
  return std::min(cap, round_up(seen + c.max_append + 2 * unit, unit));
}

}  // namespace

struct DeviceCache::Impl {
  CacheConfig config;
  std::unique_ptr<DeviceFormat> format;
  size_t tokens = 0;  // every token appended, sinks and evicted ones included
  // An evicting cache (config.budget > 0): the sinks held, as fp16 rows before RoPE in
  // sink_keys/sink_values [streams][config.sinks][head_dim], then the stream, whose first
  // `dropped` tokens (whole blocks) have left it.
  size_t sink_tokens = 0, dropped = 0;
  DeviceArray<uint16_t> sink_keys, sink_values;
  DeviceArray<float> sink_part;          // the sinks' partial per query head
  DeviceArray<uint16_t> rest_k, rest_v;  // an append's tokens past the sinks, and their
  DeviceArray<int64_t> rest_positions;   // positions, for the format's append
  int sms = 0;
  StreamView keys, values;
  DeviceArray<double> inv_freq;
  DeviceArray<float> part;  // split partials: outputs, then (max, sum) pairs
  // The last attention kernel's resident blocks per multiprocessor (asked once per kernel).
  SplitKernel resident_for;
  int resident = 0;
  int resident_blocks_of(const SplitKernel& k) {
    if (k.fn != resident_for.fn) resident = resident_blocks(k), resident_for = k;
    return resident;
  }

  int key_block() const { return format->key_block(); }
  int value_block() const { return format->value_block(); }
  int residual() const { return static_cast<int>(config.residual); }
  size_t streams() const { return config.batch * config.kv_heads; }
  float hadamard_scale() const { return 1.0f / std::sqrt(static_cast<float>(config.head_dim)); }
  size_t code_bytes(bool key, size_t n) const { return key ? format->key_code_bytes(n) : format->value_code_bytes(n); }

  void allocate(StreamView& s, size_t bytes_per_stream, int ring_tokens, int block, int wrap,
                size_t state_bytes) {
    s.stream_bytes = round_up(bytes_per_stream, 256);
    s.state_bytes = state_bytes;
    if (state_bytes > 0) {
      VQ_CUDA_CHECK(cudaMalloc(&s.state, state_bytes * streams()));
      VQ_CUDA_CHECK(cudaMemset(s.state, 0, state_bytes * streams()));
    }
    s.wrap_tokens = wrap;
    VQ_CUDA_CHECK(cudaMalloc(&s.codes, s.stream_bytes * streams()));
    VQ_CUDA_CHECK(cudaMemset(s.codes, 0, s.stream_bytes * streams()));
    s.block_tokens = block;
    s.ring_tokens = ring_tokens;
    if (ring_tokens > 0) {
      const size_t n = streams() * ring_tokens * config.head_dim;
      VQ_CUDA_CHECK(cudaMalloc(&s.ring, n * 2));
      VQ_CUDA_CHECK(cudaMemset(s.ring, 0, n * 2));
    }
  }

  // Tokens of the stream (all but the sinks), evicted ones included: the formats' token index.
  size_t stream_tokens() const { return tokens - sink_tokens; }
  size_t held_tokens() const { return tokens - dropped; }
  // Tokens of one stream held as codes now, counted from the stream's start (the evicted ones are
  // whole blocks, so the blocks fall where the CPU cache's do in what it keeps).
  int encoded(int block) const {
    return encoded_tokens(static_cast<int>(stream_tokens()), residual(), block);
  }

  void check_attend(size_t q_heads) const {
    if (tokens == 0) throw Error("cuda cache attend: the cache is empty; expected at least 1 token");
    if (q_heads == 0 || q_heads % config.kv_heads != 0 || q_heads / config.kv_heads > size_t(kMaxGroup)) {
      throw Error("cuda cache attend: q_heads " + std::to_string(q_heads) + "; expected a multiple of kv_heads " +
                  std::to_string(config.kv_heads) + " with at most " + std::to_string(kMaxGroup) + " per KV head");
    }
  }

  // Attention of the newest `queries` tokens' queries, causal (one per sequence when 1; batch 1
  // otherwise): the split pass, then the reduction. Each query is a blockIdx.z of one launch
  // (for_query() in split_decode.cuh).
  void attend_rows(const uint16_t* q, size_t q_heads, float* out, size_t queries, cudaStream_t s) {
    const CacheConfig& c = config;
    AttendParams p;
    p.q = q;
    p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    p.kv_heads = static_cast<int>(c.kv_heads), p.group = static_cast<int>(q_heads / c.kv_heads);
    p.head_dim = static_cast<int>(c.head_dim);
    p.tokens = static_cast<int>(stream_tokens());
    p.queries = static_cast<int>(queries);
    p.key_encoded = encoded(key_block());
    p.value_encoded = encoded(value_block());
    p.main_end = p.key_encoded;
    p.main_tiles = (p.main_end + kTileTokens - 1) / kTileTokens;
    p.softcap = c.softcap;
    // A windowed layer: the splits cover the fused region from the first query's first visible
    // tile on (later queries of a prompt see less; for_query() and the mask narrow it further).
    p.window = static_cast<int>(c.window);
    if (c.window > 0) {
      const int first_visible = std::max(0, p.tokens - p.queries + 1 - p.window);
      p.first_tile = std::min(first_visible / kTileTokens, p.main_tiles);
    }
    if (dropped > 0) {  // the evicted tokens' codes may be overwritten: the splits start past them
      p.window_start = static_cast<int>(dropped);
      p.first_tile = std::min(p.window_start / kTileTokens, p.main_tiles);
    }
    const int tiles = p.main_tiles - p.first_tile;
    const SplitKernel kernel = format->split_kernel(p);
    // Two full waves of the kernel's resident blocks: the splits of every stream and query, the
    // ring's included, fill them, so no wave runs a few blocks alone, and the short ring blocks
    // leave room the second wave fills. Each split is a whole number of tiles per warp, and at
    // least kMinSplitTiles: with few streams (one KV head, batch 1) two waves would cut a long
    // cache into splits of a few hundred tokens, each paying its fixed work (the query's
    // preparation, the codebooks, a partial row written and combined) for little reading.
    const int n_streams = static_cast<int>(streams() * queries);
    const int ring = p.tokens > p.key_encoded ? 1 : 0;
    const int per_stream = std::max(1 + ring, 2 * resident_blocks_of(kernel) * sms / n_streams);
    const int per_split = (tiles + per_stream - ring - 1) / (per_stream - ring);
    p.tiles_per_split = static_cast<int>(round_up(std::max(per_split, kMinSplitTiles), kWarps));
    p.main_splits = (tiles + p.tiles_per_split - 1) / p.tiles_per_split;
    p.splits = p.main_splits + ring;
    p.keys = keys, p.values = values;
    const size_t rows = c.batch * q_heads * queries;
    const size_t need = rows * p.splits * (c.head_dim + 2);
    if (need > part.size) part = DeviceArray<float>(need);
    p.part_o = part.ptr;
    p.part_ml = part.ptr + rows * p.splits * c.head_dim;
    if (p.splits > 0) launch_split_kernel(kernel, p, static_cast<int>(c.batch), s);  // 0: only sinks so far
    CombineParams cp;
    if (sink_tokens > 0) cp.sinks = attend_sinks(q, q_heads, queries, s);
    cp.part_o = p.part_o, cp.part_ml = p.part_ml, cp.splits = p.splits;
    cp.head_dim = p.head_dim, cp.q_heads = static_cast<int>(q_heads), cp.kv_heads = p.kv_heads;
    cp.value_signs = format->value_signs(), cp.value_matrix = format->value_matrix();
    cp.out = out;
    launch_combine(cp, static_cast<int>(c.batch * queries), hadamard_scale(), s);
  }

  // The sinks' partial of every query head: their keys turned to sit just before the oldest
  // token kept (the CPU cache's rotated_sink_keys; positions count from 0 with the tokens taken).
  const float* attend_sinks(const uint16_t* q, size_t q_heads, size_t queries, cudaStream_t s) {
    const CacheConfig& c = config;
    SinkParams sp;
    sp.q = q, sp.keys = sink_keys.ptr, sp.values = sink_values.ptr;
    sp.stride = static_cast<int>(c.sinks), sp.held = static_cast<int>(sink_tokens);
    sp.batch = static_cast<int>(c.batch), sp.kv_heads = static_cast<int>(c.kv_heads);
    sp.group = static_cast<int>(q_heads / c.kv_heads), sp.head_dim = static_cast<int>(c.head_dim);
    sp.queries = static_cast<int>(queries), sp.tokens = static_cast<int>(tokens);
    // The newest token sits at tokens - 1, and the stored ones (sinks, then the stream's kept
    // tokens) end there: the sinks start at tokens - stored, which is `dropped`.
    sp.first_position = static_cast<int64_t>(dropped);
    sp.rope_half = static_cast<int>(c.rope.dims / 2), sp.inv_freq = inv_freq.ptr;
    sp.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)), sp.softcap = c.softcap;
    const size_t need = c.batch * q_heads * queries * (c.head_dim + 2);
    if (need > sink_part.size) sink_part = DeviceArray<float>(need);
    sp.out = sink_part.ptr;
    launch_sink_partial(sp, s);
    return sink_part.ptr;
  }

  // The first `taken` of an append's n tokens go to the sink rows, the rest to the format (copied
  // past the sinks when a step holds both). Returns the tokens left for the format.
  size_t take_sinks(const uint16_t*& k, const uint16_t*& v, const int64_t*& positions, size_t n, size_t taken,
                    cudaStream_t s) {
    const size_t row = config.head_dim * 2, streams_n = streams(), rest = n - taken;
    for (auto [from, to] : {std::pair{k, &sink_keys}, std::pair{v, &sink_values}}) {
      VQ_CUDA_CHECK(cudaMemcpy2DAsync(to->ptr + sink_tokens * config.head_dim, config.sinks * row, from,
                                      n * row, taken * row, streams_n, cudaMemcpyDeviceToDevice, s));
    }
    if (rest == 0) return 0;
    if (rest_k.size < streams_n * rest * config.head_dim) {
      rest_k = DeviceArray<uint16_t>(streams_n * rest * config.head_dim);
      rest_v = DeviceArray<uint16_t>(streams_n * rest * config.head_dim);
      rest_positions = DeviceArray<int64_t>(config.batch * rest);
    }
    VQ_CUDA_CHECK(cudaMemcpy2DAsync(rest_k.ptr, rest * row, k + taken * config.head_dim, n * row, rest * row,
                                    streams_n, cudaMemcpyDeviceToDevice, s));
    VQ_CUDA_CHECK(cudaMemcpy2DAsync(rest_v.ptr, rest * row, v + taken * config.head_dim, n * row, rest * row,
                                    streams_n, cudaMemcpyDeviceToDevice, s));
    if (positions != nullptr) {
      VQ_CUDA_CHECK(cudaMemcpy2DAsync(rest_positions.ptr, rest * 8, positions + taken, n * 8, rest * 8,
                                      config.batch, cudaMemcpyDeviceToDevice, s));
      positions = rest_positions.ptr;
    }
    k = rest_k.ptr, v = rest_v.ptr;
    return rest;
  }

  // streaming_llm's step end: the newest whole units that fit the budget beside the sinks stay.
  void evict() {
    const size_t stream = stream_tokens(), room = config.budget - sink_tokens;
    const StreamCut cut{stream,
                        dropped,
                        static_cast<size_t>(encoded(key_block())),
                        static_cast<size_t>(encoded(value_block())),
                        static_cast<size_t>(key_block()),
                        static_cast<size_t>(value_block())};
    const size_t first = first_kept(cut, room);
    // The budget rule (eviction_problem) keeps every cut inside both streams' codes.
    const bool whole_blocks = (first - dropped) % config.block == 0 &&
                              first <= std::min(cut.key_encoded, cut.value_encoded);
    require<Error>(first == dropped || whole_blocks, "cuda cache evict",
                   "a cut at stream token " + std::to_string(first) + "; expected the start of a block of " +
                       std::to_string(config.block) + " encoded tokens");
    dropped = first;
  }

  // Bytes of one direction of one stream: the sinks, the codes it holds, residual rows and, once
  // it holds a token, its fitted state.
  size_t stream_payload(bool key) const {
    const size_t e = encoded(key ? key_block() : value_block()), wrap = keys.wrap_tokens;
    const size_t state = tokens > 0 ? (key ? keys : values).state_bytes : 0, kept = e - dropped;
    const size_t rows = sink_tokens + stream_tokens() - e;
    return code_bytes(key, wrap > 0 ? std::min(kept, wrap) : kept) + rows * config.head_dim * 2 + state;
  }

  // Bytes one direction stores, counted as KVCache::key_bytes()/value_bytes() count them: every
  // stream's payload and, once per sequence, the format's shared state.
  size_t stored(bool key) const { return stream_payload(key) * streams() + format->shared_bytes(key) * config.batch; }

  HostStream download(const StreamView& s, int block, size_t b, size_t h, bool key) const {
    require<Error>(b < config.batch && h < config.kv_heads, "cuda cache",
            "stream (" + std::to_string(b) + ", " + std::to_string(h) + ") is outside batch " +
                std::to_string(config.batch) + " x kv_heads " + std::to_string(config.kv_heads));
    HostStream out;
    const size_t seq = b * config.kv_heads + h, d = config.head_dim, e = static_cast<size_t>(encoded(block));
    const size_t wrap = static_cast<size_t>(s.wrap_tokens);
    out.encoded = e - dropped;  // an evicting cache's kept codes, as the CPU cache holds them
    require<Error>(
        wrap == 0 || out.encoded <= wrap, "cuda cache download",
        std::to_string(out.encoded) + " encoded tokens of a windowed layer whose codes wrap after " +
            std::to_string(s.wrap_tokens) + " (the older ones are gone); expected a stream still whole");
    out.codes.resize(code_bytes(key, out.encoded));
    // The kept codes start at the first kept token's slot and may wrap past the span's end.
    const size_t from = wrap > 0 ? dropped % wrap : dropped;
    const size_t first_part = wrap > 0 ? std::min(out.encoded, wrap - from) : out.encoded;
    const uint8_t* codes = s.codes + seq * s.stream_bytes;
    const size_t head_bytes = code_bytes(key, first_part);
    VQ_CUDA_CHECK(
        cudaMemcpy(out.codes.data(), codes + code_bytes(key, from), head_bytes, cudaMemcpyDeviceToHost));
    VQ_CUDA_CHECK(cudaMemcpy(out.codes.data() + head_bytes, codes, out.codes.size() - head_bytes,
                             cudaMemcpyDeviceToHost));
    out.tail_tokens = stream_tokens() - e;
    if (tokens > 0 && s.state_bytes > 0) {
      out.state.resize(s.state_bytes);
      VQ_CUDA_CHECK(
          cudaMemcpy(out.state.data(), s.state + seq * s.state_bytes, s.state_bytes, cudaMemcpyDeviceToHost));
    }
    out.tail.resize(out.tail_tokens * d * 2);
    for (size_t t = e; t < stream_tokens(); ++t) {
      const uint16_t* row = s.ring + (seq * s.ring_tokens + t % s.ring_tokens) * d;
      VQ_CUDA_CHECK(cudaMemcpy(out.tail.data() + (t - e) * d * 2, row, d * 2, cudaMemcpyDeviceToHost));
    }
    return out;
  }

  // What upload() needs of one direction's streams for `n` tokens, before anything is written.
  void check_upload(std::span<const HostStream> in, const StreamView& s, int block, size_t n,
                    bool key) const {
    const char* what = key ? "keys" : "values";
    require<Error>(in.size() == streams(), "cuda cache upload",
                   std::to_string(in.size()) + " streams of " + what +
                       "; expected batch x kv_heads = " + std::to_string(streams()));
    const size_t e = static_cast<size_t>(encoded_tokens(static_cast<int>(n), residual(), block));
    require<Error>(s.wrap_tokens == 0 || e <= static_cast<size_t>(s.wrap_tokens), "cuda cache upload",
                   std::to_string(e) + " encoded tokens for a windowed layer whose codes wrap after " +
                       std::to_string(s.wrap_tokens) + "; expected a prompt within the window");
    for (size_t i = 0; i < in.size(); ++i) {
      const HostStream& h = in[i];
      const size_t code_bytes_now = code_bytes(key, e), tail_bytes = (n - e) * config.head_dim * 2;
      const size_t state_now = n > 0 ? s.state_bytes : 0;
      if (h.state.size() != state_now) {
        throw Error("cuda cache upload: stream " + std::to_string(i) + " of " + what + " holds " +
                    std::to_string(h.state.size()) + " bytes of fitted state; expected " +
                    std::to_string(state_now) +
                    (s.state_bytes > 0 ? " (the state of the " + config.format + " format's streams)"
                                       : " (the " + config.format + " format fits no state to a stream)"));
      }
      if (h.encoded != e || h.tail_tokens != n - e || h.codes.size() != code_bytes_now ||
          h.tail.size() != tail_bytes) {
        throw Error("cuda cache upload: stream " + std::to_string(i) + " of " + what + " holds " +
                    std::to_string(h.encoded) + " encoded tokens in " + std::to_string(h.codes.size()) +
                    " bytes and " + std::to_string(h.tail_tokens) + " fp16 rows in " +
                    std::to_string(h.tail.size()) + "; expected " + std::to_string(e) + " in " +
                    std::to_string(code_bytes_now) + " and " + std::to_string(n - e) + " in " +
                    std::to_string(tail_bytes) + " for " + std::to_string(n) + " tokens");
      }
    }
  }

  void upload(std::span<const HostStream> in, const StreamView& s) const {
    const size_t d = config.head_dim;
    for (size_t seq = 0; seq < in.size(); ++seq) {
      const HostStream& h = in[seq];
      VQ_CUDA_CHECK(
          cudaMemcpy(s.codes + seq * s.stream_bytes, h.codes.data(), h.codes.size(), cudaMemcpyHostToDevice));
      if (!h.state.empty())
        VQ_CUDA_CHECK(cudaMemcpy(s.state + seq * s.state_bytes, h.state.data(), h.state.size(),
                                 cudaMemcpyHostToDevice));
      for (size_t t = h.encoded; t < h.encoded + h.tail_tokens; ++t) {
        uint16_t* row = s.ring + (seq * s.ring_tokens + t % s.ring_tokens) * d;
        VQ_CUDA_CHECK(
            cudaMemcpy(row, h.tail.data() + (t - h.encoded) * d * 2, d * 2, cudaMemcpyHostToDevice));
      }
    }
  }
};

DeviceCache::DeviceCache(const CacheConfig& config) : impl_(std::make_unique<Impl>()) {
  if (const std::string problem = config_problem(config); !problem.empty()) throw Error("cuda cache: " + problem);
  Impl& m = *impl_;
  m.config = config;
  m.format = make_device_format(config);
  require<Error>(m.format->windowed() || config.residual == 0, "cuda cache",
          "residual " + std::to_string(config.residual) + "; the " + config.format +
              " format keeps no residual window (only windowed ones, kivi and qjl, do)");
  int device = 0;
  VQ_CUDA_CHECK(cudaGetDevice(&device));
  VQ_CUDA_CHECK(cudaDeviceGetAttribute(&m.sms, cudaDevAttrMultiProcessorCount, device));
  if (config.budget > 0) {
    const size_t block = std::lcm<size_t>(m.key_block(), m.value_block());
    require<Error>(block == config.block, "cuda cache",
                   "block " + std::to_string(config.block) + " for the " + config.format +
                       " format, which encodes " + std::to_string(block) + " tokens together; expected " +
                       std::to_string(block));
    const size_t rows = m.streams() * config.sinks * config.head_dim;
    m.sink_keys = DeviceArray<uint16_t>(rows), m.sink_values = DeviceArray<uint16_t>(rows);
  }
  // Whole 32-token tiles (and whole key blocks) exist for every token the kernels may fetch.
  const size_t unit = std::lcm(std::lcm<size_t>(32, m.key_block()), m.value_block());
  const size_t cap = round_up(config.capacity, unit), span = code_span(config, cap, unit);
  const int wrap = span < cap ? static_cast<int>(span) : 0;
  const bool rings = m.format->windowed();
  m.allocate(m.keys, m.format->key_code_bytes(span), rings ? m.residual() + m.key_block() : 0, m.key_block(),
             wrap, m.format->stream_state_bytes(true));
  m.allocate(m.values, m.format->value_code_bytes(span), rings ? m.residual() + m.value_block() : 0,
             m.value_block(), wrap, m.format->stream_state_bytes(false));
  // The CPU's apply_rope frequencies, from the same function.
  const size_t half = config.rope.dims / 2;
  std::vector<double> inv_freq(std::max<size_t>(half, 1));
  for (size_t i = 0; i < half; ++i) inv_freq[i] = rope_inverse_frequency(config.rope, i);
  m.inv_freq = DeviceArray<double>(inv_freq.data(), inv_freq.size());
}

DeviceCache::~DeviceCache() {
  Impl& m = *impl_;
  // Destructors do not throw: a failing cudaFree here has nothing left to report to.
  for (void* p : {static_cast<void*>(m.keys.codes), static_cast<void*>(m.values.codes),
                  static_cast<void*>(m.keys.ring), static_cast<void*>(m.values.ring),
                  static_cast<void*>(m.keys.state), static_cast<void*>(m.values.state)}) {
    if (p != nullptr) cudaFree(p);
  }
}

void DeviceCache::append(const uint16_t* k, const uint16_t* v, const int64_t* positions, size_t n,
                         void* stream) {
  Impl& m = *impl_;
  const CacheConfig& c = m.config;
  if (n == 0) throw Error("cuda cache append: 0 tokens; expected at least 1");
  // An evicting cache whose codes wrap holds its budget and one append whatever it has taken.
  const bool rolls = c.budget > 0 && m.keys.wrap_tokens > 0;
  const size_t held = rolls ? m.held_tokens() : m.tokens;
  if (held + n > c.capacity || m.tokens + n > size_t{INT32_MAX}) {
    throw Error("cuda cache append: " + std::to_string(held) + " + " + std::to_string(n) + " tokens exceed " +
                (held + n > c.capacity ? "capacity " + std::to_string(c.capacity)
                                       : "the 2^31 - 1 tokens the kernels count"));
  }
  if (m.keys.wrap_tokens > 0 && n > c.max_append) {
    throw Error("cuda cache append: " + std::to_string(n) +
                " tokens at once on a windowed layer whose codes " + "wrap after " +
                std::to_string(m.keys.wrap_tokens) + "; expected at most max_append " +
                std::to_string(c.max_append));
  }
  if (k == nullptr || v == nullptr || (c.rope.dims > 0 && positions == nullptr)) {
    throw Error("cuda cache append: null keys, values or positions; expected device pointers");
  }
  // The sequence's first tokens fill the sinks of an evicting cache; the format takes the rest.
  const size_t all = n, old_stream = m.stream_tokens(), taken = std::min(n, c.sinks - m.sink_tokens);
  if (taken > 0) n = m.take_sinks(k, v, positions, n, taken, static_cast<cudaStream_t>(stream));
  m.sink_tokens += taken;
  if (n == 0) {
    m.tokens += all;
    return;
  }
  AppendParams p;
  p.k = k, p.v = v, p.positions = positions;
  p.n = static_cast<int>(n), p.old_tokens = static_cast<int>(old_stream);
  p.kv_heads = static_cast<int>(c.kv_heads), p.head_dim = static_cast<int>(c.head_dim);
  p.residual = m.residual();
  p.rope_half = static_cast<int>(c.rope.dims / 2);
  p.inv_freq = m.inv_freq.ptr;
  p.keys = m.keys, p.values = m.values;
  m.format->append(p, static_cast<int>(c.batch), static_cast<cudaStream_t>(stream));
  m.tokens += all;
}

void DeviceCache::attend(const uint16_t* q, size_t q_heads, float* out, void* stream) {
  Impl& m = *impl_;
  m.check_attend(q_heads);
  m.attend_rows(q, q_heads, out, 1, static_cast<cudaStream_t>(stream));
}

void DeviceCache::attend_causal(const uint16_t* q, size_t nq, size_t q_heads, float* out, void* stream) {
  Impl& m = *impl_;
  m.check_attend(q_heads);
  if (nq == 0 || nq > m.tokens || nq > 65535) {
    throw Error("cuda cache attend_causal: " + std::to_string(nq) + " queries; expected 1.." +
                std::to_string(std::min<size_t>(m.tokens, 65535)) +
                ", one per token of the newest ones held (at most 65535)");
  }
  m.attend_rows(q, q_heads, out, nq, static_cast<cudaStream_t>(stream));
}

void DeviceCache::finish_step() {
  if (impl_->config.budget > 0 && impl_->tokens > 0) impl_->evict();
}

size_t DeviceCache::tokens() const { return impl_->tokens; }
size_t DeviceCache::held_tokens() const { return impl_->held_tokens(); }
const CacheConfig& DeviceCache::config() const { return impl_->config; }

size_t DeviceCache::attend_read_bytes() const {
  return (impl_->stream_payload(true) + impl_->stream_payload(false)) * impl_->streams();
}

size_t DeviceCache::stored_bytes() const { return stored_key_bytes() + stored_value_bytes(); }
size_t DeviceCache::stored_key_bytes() const { return impl_->stored(true); }
size_t DeviceCache::stored_value_bytes() const { return impl_->stored(false); }

HostStream DeviceCache::download_keys(size_t batch, size_t kv_head) const {
  return impl_->download(impl_->keys, impl_->key_block(), batch, kv_head, true);
}
HostStream DeviceCache::download_values(size_t batch, size_t kv_head) const {
  return impl_->download(impl_->values, impl_->value_block(), batch, kv_head, false);
}

void DeviceCache::upload(size_t tokens, std::span<const HostStream> keys,
                         std::span<const HostStream> values) {
  Impl& m = *impl_;
  require<Error>(m.config.budget == 0, "cuda cache upload",
                 "streams for an evicting cache (budget " + std::to_string(m.config.budget) +
                     "); expected a cache that keeps every token: sessions of evicting caches are not saved");
  require<Error>(tokens <= m.config.capacity, "cuda cache upload",
                 std::to_string(tokens) + " tokens; expected at most capacity " +
                     std::to_string(m.config.capacity));
  m.check_upload(keys, m.keys, m.key_block(), tokens, true);
  m.check_upload(values, m.values, m.value_block(), tokens, false);
  m.upload(keys, m.keys);
  m.upload(values, m.values);
  m.tokens = tokens;
}

}  // namespace veloxquant::cuda
