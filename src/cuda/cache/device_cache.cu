// DeviceCache: configuration checks, device memory, the per-call plans (which tokens the codes
// hold, how the sequence is split) and the launches. The kernels live in the family folders.
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "cuda/attention/launchers.h"
#include "cuda/attention/split_decode.cuh"
#include "cuda/cache/config_rules.h"
#include "cuda/common/check.cuh"
#include "cuda/kivi/kivi_layout.cuh"
#include "cuda/qjl/qjl_layout.cuh"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

template <class T>
T* device_copy(const std::vector<T>& host) {
  T* p = nullptr;
  VQ_CUDA_CHECK(cudaMalloc(&p, host.size() * sizeof(T)));
  VQ_CUDA_CHECK(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw Error("cuda cache: " + what);
}

static_assert(kQjlProj == size_t(qjl::kProj) && kQjlOutlierProj == size_t(qjl::kOutlierProj));

}  // namespace

struct DeviceCache::Impl {
  CacheConfig config;
  size_t tokens = 0;
  int sms = 0;
  StreamView keys, values;
  std::vector<double> inv_freq_host;
  double* inv_freq = nullptr;
  float *key_signs = nullptr, *value_signs = nullptr, *key_bounds = nullptr, *value_bounds = nullptr;
  float *key_levels = nullptr, *value_levels = nullptr, *key_sketch = nullptr;
  float* qjl_sketch_t = nullptr;       // S^T, head_dim x proj
  uint16_t* qjl_sketch_t_f16 = nullptr;
  float* part = nullptr;  // split partials: outputs, then (max, sum) pairs
  size_t part_floats = 0;
  // The last attention kernel's resident blocks per multiprocessor (asked once per kernel).
  SplitKernel resident_for;
  int resident = 0;
  int resident_blocks_of(const SplitKernel& k) {
    if (k.fn != resident_for.fn) resident = resident_blocks(k), resident_for = k;
    return resident;
  }

  bool kivi() const { return config.format == CacheFormat::Kivi; }
  bool qjl() const { return config.format == CacheFormat::Qjl; }
  // KIVI and QJL keep the newest tokens in fp16 rings and encode keys in groups, values in quads.
  bool windowed() const { return kivi() || qjl(); }
  bool turboquant() const {
    return config.format == CacheFormat::TurboQuantMse || config.format == CacheFormat::TurboQuantProd;
  }
  int key_block() const { return windowed() ? static_cast<int>(config.group) : 1; }
  int value_block() const { return windowed() ? 4 : 1; }
  int residual() const { return static_cast<int>(config.residual); }
  size_t streams() const { return config.batch * config.kv_heads; }
  float hadamard_scale() const { return 1.0f / std::sqrt(static_cast<float>(config.head_dim)); }

  // Code bytes of n tokens of one stream (n a multiple of the stream's block).
  size_t key_code_bytes(size_t n) const {
    const size_t d = config.head_dim;
    switch (config.format) {
      case CacheFormat::Fp16: return n * d * 2;
      case CacheFormat::Kivi: return n / config.group * kivi::KeyLayout{int(d), int(config.bits), int(config.group)}.block_bytes();
      case CacheFormat::TurboQuantMse: return n * (4 + d * config.bits / 8);
      case CacheFormat::TurboQuantProd: return n * (8 + d * config.bits / 8);  // 2 norms, bits-1 + 1 bits
      case CacheFormat::Qjl: return n / config.group * qjl::KeyLayout{int(config.qjl.outliers), int(config.group)}.block_bytes();
    }
    return 0;
  }
  size_t value_code_bytes(size_t n) const {
    const size_t d = config.head_dim;
    switch (config.format) {
      case CacheFormat::Fp16: return n * d * 2;
      case CacheFormat::Kivi: return n / 4 * kivi::ValueLayout{int(d), int(config.bits), int(std::min(config.group, d))}.block_bytes();
      case CacheFormat::Qjl: return n / 4 * kivi::ValueLayout{int(d), int(config.bits), int(config.qjl.value_group)}.block_bytes();
      default: return n * (4 + d * config.bits / 8);
    }
  }

  void allocate(StreamView& s, size_t bytes_per_stream, int ring_tokens, int block) {
    s.stream_bytes = round_up(bytes_per_stream, 256);
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

  // Tokens of one stream held as codes now.
  int encoded(int block) const { return encoded_tokens(static_cast<int>(tokens), residual(), block); }

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
    p.tokens = static_cast<int>(tokens);
    p.queries = static_cast<int>(queries);
    p.key_encoded = windowed() ? encoded(key_block()) : p.tokens;
    p.value_encoded = windowed() ? encoded(value_block()) : p.tokens;
    p.main_end = p.key_encoded;
    p.main_tiles = (p.main_end + kTileTokens - 1) / kTileTokens;
    p.kivi_group = static_cast<int>(qjl() ? c.qjl.value_group : c.group);
    if (qjl()) {
      const int d = static_cast<int>(c.head_dim), no = static_cast<int>(c.qjl.outliers);
      const float half_pi = static_cast<float>(std::sqrt(std::numbers::pi / 2));  // the CPU codec's float expressions
      p.qjl = QjlAttend{qjl_sketch_t, qjl_sketch_t_f16, static_cast<int>(c.group), no,
                        std::sqrt(static_cast<float>(d - no)) * half_pi / static_cast<float>(c.qjl.proj),
                        std::sqrt(static_cast<float>(no)) * half_pi / static_cast<float>(c.qjl.outlier_proj)};
    }
    p.key_sketch = key_sketch;  // before the kernel is chosen: it picks turboquant_prod's by it
    SplitKernel kernel;
    switch (c.format) {
      case CacheFormat::Fp16: kernel = fp16_split_kernel(p); break;
      case CacheFormat::Kivi: kernel = kivi_split_kernel(p, int(c.bits)); break;
      case CacheFormat::TurboQuantMse:
      case CacheFormat::TurboQuantProd: kernel = turboquant_split_kernel(p, int(c.bits)); break;
      case CacheFormat::Qjl: kernel = qjl_split_kernel(p, int(c.bits)); break;
    }
    // Two full waves of the kernel's resident blocks: the splits of every stream and query, the
    // ring's included, fill them, so no wave runs a few blocks alone, and the short ring blocks
    // leave room the second wave fills. Each split is a whole number of tiles per warp, and at
    // least kMinSplitTiles: with few streams (one KV head, batch 1) two waves would cut a long
    // cache into splits of a few hundred tokens, each paying its fixed work (the query's
    // preparation, the codebooks, a partial row written and combined) for little reading.
    const int n_streams = static_cast<int>(streams() * queries);
    const int ring = p.tokens > p.key_encoded ? 1 : 0;
    const int per_stream = std::max(1 + ring, 2 * resident_blocks_of(kernel) * sms / n_streams);
    const int per_split = (p.main_tiles + per_stream - ring - 1) / (per_stream - ring);
    p.tiles_per_split = static_cast<int>(round_up(std::max(per_split, kMinSplitTiles), kWarps));
    p.main_splits = (p.main_tiles + p.tiles_per_split - 1) / p.tiles_per_split;
    p.splits = p.main_splits + ring;
    p.keys = keys, p.values = values;
    p.key_codebook = key_levels, p.value_codebook = value_levels, p.key_signs = key_signs;
    const size_t rows = c.batch * q_heads * queries;
    const size_t need = rows * p.splits * (c.head_dim + 2);
    if (need > part_floats) {
      if (part != nullptr) VQ_CUDA_CHECK(cudaFree(part));
      part = nullptr;
      VQ_CUDA_CHECK(cudaMalloc(&part, need * sizeof(float)));
      part_floats = need;
    }
    p.part_o = part;
    p.part_ml = part + rows * p.splits * c.head_dim;
    launch_split_kernel(kernel, p, static_cast<int>(c.batch), s);
    CombineParams cp;
    cp.part_o = p.part_o, cp.part_ml = p.part_ml, cp.splits = p.splits;
    cp.head_dim = p.head_dim, cp.q_heads = static_cast<int>(q_heads), cp.kv_heads = p.kv_heads;
    cp.value_signs = turboquant() ? value_signs : nullptr;
    cp.out = out;
    launch_combine(cp, static_cast<int>(c.batch * queries), hadamard_scale(), s);
  }

  // Bytes of one direction of one stream: codes and residual rows.
  size_t stream_payload(bool key) const {
    const size_t d = config.head_dim, t = tokens;
    const size_t e = config.format == CacheFormat::Fp16 ? t : size_t(encoded(key ? key_block() : value_block()));
    return (key ? key_code_bytes(e) : value_code_bytes(e)) + (t - e) * d * 2;
  }

  // Bytes one direction stores, counted as KVCache::key_bytes()/value_bytes() count them: every
  // stream's payload and, once per sequence, the codec's shared state (TurboQuant's sign bits and
  // f32 codebook, turboquant_prod's f32 sketch, qjl's f32 sketch).
  size_t stored(bool key) const {
    size_t state = qjl() && key ? config.qjl.sketch.size() * sizeof(float) : 0;
    if (turboquant()) {
      const TurboQuantTables& tq = config.turboquant;
      state = (config.head_dim + 7) / 8 +
              sizeof(float) * (key ? tq.key_centroids.size() + tq.key_sketch.size() : tq.value_centroids.size());
    }
    return stream_payload(key) * streams() + state * config.batch;
  }

  HostStream download(const StreamView& s, int block, size_t b, size_t h, bool key) const {
    require(b < config.batch && h < config.kv_heads,
            "stream (" + std::to_string(b) + ", " + std::to_string(h) + ") is outside batch " +
                std::to_string(config.batch) + " x kv_heads " + std::to_string(config.kv_heads));
    HostStream out;
    const size_t seq = b * config.kv_heads + h, d = config.head_dim;
    out.encoded = config.format == CacheFormat::Fp16 ? tokens : static_cast<size_t>(encoded(block));
    out.codes.resize(key ? key_code_bytes(out.encoded) : value_code_bytes(out.encoded));
    VQ_CUDA_CHECK(cudaMemcpy(out.codes.data(), s.codes + seq * s.stream_bytes, out.codes.size(), cudaMemcpyDeviceToHost));
    out.tail_tokens = tokens - out.encoded;
    out.tail.resize(out.tail_tokens * d * 2);
    for (size_t t = out.encoded; t < tokens; ++t) {
      const uint16_t* row = s.ring + (seq * s.ring_tokens + t % s.ring_tokens) * d;
      VQ_CUDA_CHECK(cudaMemcpy(out.tail.data() + (t - out.encoded) * d * 2, row, d * 2, cudaMemcpyDeviceToHost));
    }
    return out;
  }
};

DeviceCache::DeviceCache(const CacheConfig& config) : impl_(std::make_unique<Impl>()) {
  if (const std::string problem = config_problem(config); !problem.empty()) throw Error("cuda cache: " + problem);
  Impl& m = *impl_;
  m.config = config;
  int device = 0;
  VQ_CUDA_CHECK(cudaGetDevice(&device));
  VQ_CUDA_CHECK(cudaDeviceGetAttribute(&m.sms, cudaDevAttrMultiProcessorCount, device));
  // Whole 32-token tiles (and whole key groups) exist for every token the kernels may fetch.
  const size_t cap = round_up(config.capacity, std::max<size_t>(32, config.group));
  const int ring_k = m.windowed() ? m.residual() + m.key_block() : 0;
  const int ring_v = m.windowed() ? m.residual() + m.value_block() : 0;
  m.allocate(m.keys, m.key_code_bytes(cap), ring_k, m.key_block());
  m.allocate(m.values, m.value_code_bytes(cap), ring_v, m.value_block());
  // The CPU's apply_rope frequencies, from the same function.
  const size_t half = config.rope.dims / 2;
  m.inv_freq_host.resize(std::max<size_t>(half, 1));
  for (size_t i = 0; i < half; ++i) m.inv_freq_host[i] = rope_inverse_frequency(config.rope, i);
  m.inv_freq = device_copy(m.inv_freq_host);
  if (m.turboquant()) {
    const TurboQuantTables& t = config.turboquant;
    m.key_signs = device_copy(t.key_signs);
    m.value_signs = device_copy(t.value_signs);
    m.key_bounds = device_copy(t.key_boundaries);
    m.value_bounds = device_copy(t.value_boundaries);
    m.key_levels = device_copy(t.key_centroids);
    m.value_levels = device_copy(t.value_centroids);
    if (!t.key_sketch.empty()) {
      // Transposed, so that the kernels' threads (one per sketch row) read adjacent floats.
      const size_t d = config.head_dim;
      std::vector<float> transposed(d * d);
      for (size_t r = 0; r < d; ++r)
        for (size_t c = 0; c < d; ++c) transposed[c * d + r] = t.key_sketch[r * d + c];
      m.key_sketch = device_copy(transposed);
    }
  }
  if (m.qjl()) {
    // Transposed like turboquant_prod's (a step's threads read adjacent floats), and in fp16 for
    // the MMA operands of the outlier columns, in the attention kernel's pair order: within each
    // 32 rows, pair j holds rows j and j + 16.
    const size_t d = config.head_dim, proj = config.qjl.proj;
    std::vector<float> transposed(d * proj);
    std::vector<uint16_t> transposed_f16(d * proj);
    for (size_t r = 0; r < proj; ++r)
      for (size_t c = 0; c < d; ++c) {
        transposed[c * proj + r] = config.qjl.sketch[r * d + c];
        const size_t at = r / 32 * 32 + r % 16 * 2 + r % 32 / 16;
        transposed_f16[c * proj + at] = __half_as_ushort(__float2half_rn(config.qjl.sketch[r * d + c]));
      }
    m.qjl_sketch_t = device_copy(transposed);
    m.qjl_sketch_t_f16 = device_copy(transposed_f16);
  }
}

DeviceCache::~DeviceCache() {
  Impl& m = *impl_;
  // Destructors do not throw: a failing cudaFree here has nothing left to report to.
  for (void* p : {static_cast<void*>(m.keys.codes), static_cast<void*>(m.values.codes),
                  static_cast<void*>(m.keys.ring), static_cast<void*>(m.values.ring),
                  static_cast<void*>(m.inv_freq), static_cast<void*>(m.key_signs),
                  static_cast<void*>(m.value_signs), static_cast<void*>(m.key_bounds),
                  static_cast<void*>(m.value_bounds), static_cast<void*>(m.key_levels),
                  static_cast<void*>(m.value_levels), static_cast<void*>(m.key_sketch),
                  static_cast<void*>(m.qjl_sketch_t), static_cast<void*>(m.qjl_sketch_t_f16),
                  static_cast<void*>(m.part)}) {
    if (p != nullptr) cudaFree(p);
  }
}

void DeviceCache::append(const uint16_t* k, const uint16_t* v, const int64_t* positions, size_t n,
                         void* stream) {
  Impl& m = *impl_;
  const CacheConfig& c = m.config;
  if (n == 0) throw Error("cuda cache append: 0 tokens; expected at least 1");
  if (m.tokens + n > c.capacity) {
    throw Error("cuda cache append: " + std::to_string(m.tokens) + " + " + std::to_string(n) +
                " tokens exceed capacity " + std::to_string(c.capacity));
  }
  if (k == nullptr || v == nullptr || (c.rope.dims > 0 && positions == nullptr)) {
    throw Error("cuda cache append: null keys, values or positions; expected device pointers");
  }
  AppendParams p;
  p.k = k, p.v = v, p.positions = positions;
  p.n = static_cast<int>(n), p.old_tokens = static_cast<int>(m.tokens);
  p.kv_heads = static_cast<int>(c.kv_heads), p.head_dim = static_cast<int>(c.head_dim);
  p.residual = m.residual();
  p.rope_half = static_cast<int>(c.rope.dims / 2);
  p.inv_freq = m.inv_freq;
  p.keys = m.keys, p.values = m.values;
  const auto s = static_cast<cudaStream_t>(stream);
  const int batch = static_cast<int>(c.batch);
  switch (c.format) {
    case CacheFormat::Fp16: launch_fp16_append(p, batch, s); break;
    case CacheFormat::Kivi: launch_kivi_append(p, batch, int(c.bits), int(c.group), s); break;
    case CacheFormat::TurboQuantMse:
    case CacheFormat::TurboQuantProd:
      launch_turboquant_append(p, batch, int(c.bits),
                               TurboQuantDevice{m.key_signs, m.value_signs, m.key_bounds, m.value_bounds,
                                                m.key_levels, m.key_sketch, m.hadamard_scale()}, s);
      break;
    case CacheFormat::Qjl:
      launch_qjl_append(p, batch, int(c.bits),
                        QjlDevice{m.qjl_sketch_t, int(c.group), int(c.qjl.outliers), int(c.qjl.value_group)}, s);
      break;
  }
  m.tokens += n;
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

size_t DeviceCache::tokens() const { return impl_->tokens; }
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

}  // namespace veloxquant::cuda
