// CUDA decode benchmark: fused decode attention over compressed caches (KIVI 2/4-bit,
// TurboQuant-MSE and TurboQuant-prod 2/3/4-bit, QJL keys with 2/4-bit values, VecInfer's 1-bit
// product-VQ keys with 4-bit values, kvquant_nuq's 3-bit records decoded tile by tile, keys turned
// by RoPE as they are read, KITTY's 2-bit keys with 16 channels at 4 bits decoded tile by tile and
// 2-bit values) and over our fp16 cache, plus quantize-on-append against a plain fp16
// store of the same token. Writes JSON lines (one record per measurement) to --out; the driver
// bench/cuda/run_h200.sh adds PyTorch SDPA on the same shapes and writes the report.
//
//   veloxquant_cuda_bench --out FILE [--quick] [--iters N] [--method NAME] [--batch B] [--seq S]
//
// --method, --batch and --seq keep one method or shape (to profile a single configuration).
//
// Each timing is the median of N >= 50 single launches timed with CUDA events after warm-up; when
// one cache would fit in L2 (60 MB) the launches rotate over several caches, so the bytes come
// from HBM. Bandwidth counts the bytes the attention reads from the cache (codes, scales, fp16
// residual rows), not the query.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/lloyd_max.h"
#include "core/rng.h"
#include "cuda/common/check.cuh"
#include "cuda/kitty/kitty_rules.h"
#include "cuda/kvquant/kvquant_rules.h"
#include "cuda/qjl/qjl_rules.h"
#include "cuda/turboquant/turboquant_rules.h"
#include "cuda/vecinfer/vecinfer_rules.h"
#include "cuda_bench_util.cuh"
#include "veloxquant/cuda.h"

namespace vq = veloxquant;
namespace vc = veloxquant::cuda;
using vc::bench::DeviceBuffer;
using vc::bench::kL2Bytes;
using vc::bench::median_us;

namespace {

constexpr size_t kQHeads = 32, kKvHeads = 8, kDim = 128, kChunk = 8192;

struct Method {
  const char* name;
  std::string format;  // the device format (CacheConfig::format)
  unsigned bits;
};

// Deterministic pseudo-normal fp16 values (sum of four uniforms), keys with outlier channels.
__global__ void fill_rows(__half* x, size_t n, size_t dim, uint64_t seed, bool keys) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t h = (i + seed * 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
    float s = 0;
    for (int k = 0; k < 4; ++k) {
      h ^= h >> 31, h *= 0x94D049BB133111EBull, h ^= h >> 29;
      s += static_cast<float>(h >> 40) / 16777216.0f;
    }
    const float scale = keys && i % dim % 16 == 3 ? 6.0f : 1.0f;
    x[i] = __float2half((s - 2.0f) * 1.7f * scale);
  }
}

__global__ void fill_positions(int64_t* p, size_t batch, size_t n, size_t first) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < batch * n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = static_cast<int64_t>(first + i % n);
}

vc::CacheConfig config_for(const Method& m, size_t batch, size_t capacity) {
  vc::CacheConfig c;
  c.format = m.format;
  c.batch = batch, c.kv_heads = kKvHeads, c.head_dim = kDim, c.capacity = capacity;
  c.bits = m.bits, c.group = 32;
  const bool windowed = m.format == "kivi" || m.format == "qjl" || m.format == "kitty";
  c.residual = windowed ? 128 : 0;
  c.rope.dims = kDim;
  const bool prod = m.format == "turboquant_prod", rvq = m.format == "turboquant_rvq";
  if (m.format == "turboquant_mse" || prod || rvq) {
    auto t = std::make_shared<vc::TurboQuantTables>();
    for (uint64_t tag : {1, 2}) {
      vq::Rng rng(vq::derive_seed(0, {0, tag}));
      auto& signs = tag == 1 ? t->key_signs : t->value_signs;
      for (size_t i = 0; i < kDim; ++i) signs.push_back(rng.sign());
    }
    if (rvq) {  // m.bits: both stages' bits
      const vq::ResidualStages stages = vq::gaussian_residual_stages(m.bits / 2);
      t->key_centroids = t->value_centroids = vq::residual_joint_table(stages, m.bits / 2,
                                                                       1.0 / std::sqrt(double(kDim)));
      t->stage1_levels = stages.gaussian.centroids, t->stage1_boundaries = stages.gaussian.boundaries;
      t->stage2_boundaries = stages.laplacian.boundaries;
      t->stage_scale = std::sqrt(float(kDim));
    } else {
      const vq::ScalarCodebook values = vq::lloyd_max_sphere_coordinate(m.bits, kDim);
      const vq::ScalarCodebook keys = prod ? vq::lloyd_max_sphere_coordinate(m.bits - 1, kDim) : values;
      t->key_centroids = keys.centroids, t->value_centroids = values.centroids;
      t->key_boundaries = keys.boundaries, t->value_boundaries = values.boundaries;
    }
    if (prod) {
      vq::Rng rng(vq::derive_seed(0, {0, 3}));
      for (size_t i = 0; i < kDim * kDim; ++i) t->key_sketch.push_back(static_cast<float>(rng.normal()));
    }
    c.tables = std::move(t);
  }
  if (m.format == "vecinfer") {  // vecinfer's defaults at head_dim 128, random tables (speed only)
    auto t = std::make_shared<vc::VecinferTables>();
    t->dims = 8, t->centroids = 256;
    vq::Rng rng(vq::derive_seed(0, {0, 5}));
    for (size_t i = 0; i < kDim; ++i)
      t->key_signs.push_back(rng.sign()), t->values.value_signs.push_back(rng.sign());
    t->smooth.assign(kKvHeads * kDim, 1.0f);
    for (size_t i = 0; i < kKvHeads * kDim * t->centroids; ++i)
      t->codebooks.push_back(static_cast<float>(rng.normal() / std::sqrt(double(kDim))));
    const vq::ScalarCodebook values = vq::lloyd_max_sphere_coordinate(m.bits, kDim);
    t->values.value_centroids = values.centroids, t->values.value_boundaries = values.boundaries;
    c.tables = std::move(t);
  }
  if (m.format == "kvquant_nuq") {  // kvquant_nuq's defaults, an even grid over +-3 (speed only)
    auto t = std::make_shared<vc::KvquantTables>();
    t->outliers = 1, t->sink = true;
    const size_t levels = size_t{1} << m.bits;
    for (size_t h = 0; h < kKvHeads; ++h)
      for (size_t i = 0; i < levels; ++i)
        t->key_levels.push_back(-1.0f + 2.0f * float(i) / float(levels - 1));
    t->value_levels = t->key_levels;
    t->key_lo.assign(kKvHeads * kDim, -3.0f), t->key_hi.assign(kKvHeads * kDim, 3.0f);
    c.tables = std::move(t);
    c.keys_before_rope = true;
  }
  if (m.format == "kitty") c.tables = std::make_shared<vc::KittyTables>();  // 2-bit keys, 16 channels at 4
  if (m.format == "qjl") {  // qjl's defaults at head_dim 128
    auto t = std::make_shared<vc::QjlTables>();
    vq::Rng rng(vq::derive_seed(0, {0, 4}));
    t->sketch.resize(t->proj * kDim);
    for (float& x : t->sketch) x = static_cast<float>(rng.normal());
    c.tables = std::move(t);
  }
  return c;
}

// Appends `tokens` random tokens in chunks (prefill-style appends).
void fill(vc::DeviceCache& cache, size_t batch, size_t tokens, uint64_t seed) {
  const size_t rows = batch * kKvHeads * kChunk * kDim;
  DeviceBuffer<__half> k(rows), v(rows);
  DeviceBuffer<int64_t> pos(batch * kChunk);
  for (size_t at = 0; at < tokens; at += kChunk) {
    const size_t n = std::min(kChunk, tokens - at);
    fill_rows<<<1024, 256>>>(k.ptr, batch * kKvHeads * n * kDim, kDim, seed + at, true);
    fill_rows<<<1024, 256>>>(v.ptr, batch * kKvHeads * n * kDim, kDim, seed + at + 1, false);
    fill_positions<<<64, 256>>>(pos.ptr, batch, n, at);
    VQ_CUDA_CHECK(cudaGetLastError());
    cache.append(reinterpret_cast<uint16_t*>(k.ptr), reinterpret_cast<uint16_t*>(v.ptr), pos.ptr, n);
  }
  VQ_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace

int main(int argc, char** argv) {
  const char* out_path = nullptr;
  bool quick = false;
  int iters = 50;
  std::string only_method;
  size_t only_batch = 0, only_seq = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::max(50, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--method") && i + 1 < argc) only_method = argv[++i];
    else if (!std::strcmp(argv[i], "--batch") && i + 1 < argc) only_batch = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--seq") && i + 1 < argc) only_seq = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: %s --out FILE [--quick] [--iters N>=50] [--method NAME] [--batch B] [--seq S]\n",
                   argv[0]);
      return 2;
    }
  }
  if (out_path == nullptr) {
    std::fprintf(stderr, "veloxquant_cuda_bench: --out FILE is required\n");
    return 2;
  }
  FILE* out = std::fopen(out_path, "w");
  if (out == nullptr) {
    std::fprintf(stderr, "veloxquant_cuda_bench: cannot write %s\n", out_path);
    return 2;
  }
  const std::vector<Method> methods = {{"fp16", "fp16", 16},
                                       {"kivi2", "kivi", 2},
                                       {"kivi4", "kivi", 4},
                                       {"tq_mse2", "turboquant_mse", 2},
                                       {"tq_mse3", "turboquant_mse", 3},
                                       {"tq_mse4", "turboquant_mse", 4},
                                       {"tq_prod2", "turboquant_prod", 2},
                                       {"tq_prod3", "turboquant_prod", 3},
                                       {"tq_prod4", "turboquant_prod", 4},
                                       {"tq_rvq1", "turboquant_rvq", 2},
                                       {"tq_rvq2", "turboquant_rvq", 4},
                                       {"qjl2", "qjl", 2},
                                       {"qjl4", "qjl", 4},
                                       {"kitty2", "kitty", 2},
                                       {"vecinfer4", "vecinfer", 4},
                                       {"kvquant3", "kvquant_nuq", 3}};
  const std::vector<size_t> batches = {1, 8};
  const std::vector<size_t> lengths = quick ? std::vector<size_t>{4096, 131072} : std::vector<size_t>{4096, 32768, 131072};
  try {
    for (size_t batch : batches)
      for (size_t seq : lengths)
        for (const Method& m : methods) {
          if ((!only_method.empty() && only_method != m.name) || (only_batch && only_batch != batch) ||
              (only_seq && only_seq != seq)) {
            continue;
          }
          const int append_steps = 10 + iters;
          const vc::CacheConfig config = config_for(m, batch, seq + append_steps);
          // Enough caches that their reads do not fit in L2 together.
          std::vector<std::unique_ptr<vc::DeviceCache>> caches;
          caches.push_back(std::make_unique<vc::DeviceCache>(config));
          fill(*caches[0], batch, seq, 7);
          const size_t read = caches[0]->attend_read_bytes();
          const size_t copies = std::min<size_t>(8, (3 * kL2Bytes + read - 1) / read);
          for (size_t i = 1; i < copies; ++i) {
            caches.push_back(std::make_unique<vc::DeviceCache>(config));
            fill(*caches[i], batch, seq, 7 + i);
          }
          DeviceBuffer<__half> q(batch * kQHeads * kDim);
          DeviceBuffer<float> o(batch * kQHeads * kDim);
          fill_rows<<<64, 256>>>(q.ptr, batch * kQHeads * kDim, kDim, 99, false);
          VQ_CUDA_CHECK(cudaGetLastError());
          const double attend = median_us(10, iters, [&](int i) {
            caches[i % copies]->attend(reinterpret_cast<uint16_t*>(q.ptr), kQHeads, o.ptr);
          });
          VQ_CUDA_CHECK(cudaGetLastError());
          std::fprintf(out, "{\"kind\": \"attend\", \"method\": \"%s\", \"batch\": %zu, \"seq\": %zu, "
                       "\"q_heads\": %zu, \"kv_heads\": %zu, \"head_dim\": %zu, \"us\": %.3f, \"read_bytes\": %zu, "
                       "\"stored_bytes\": %zu, \"gbps\": %.1f, \"caches\": %zu}\n",
                       m.name, batch, seq, kQHeads, kKvHeads, kDim, attend, read, caches[0]->stored_bytes(),
                       read / attend / 1e3, copies);
          // Quantize-on-append of one decode token per sequence, on the full cache.
          const size_t rows = batch * kKvHeads * kDim;
          DeviceBuffer<__half> k1(rows), v1(rows);
          DeviceBuffer<int64_t> pos(batch);
          fill_rows<<<64, 256>>>(k1.ptr, rows, kDim, 5, true);
          fill_rows<<<64, 256>>>(v1.ptr, rows, kDim, 6, false);
          fill_positions<<<1, 32>>>(pos.ptr, batch, 1, seq);
          VQ_CUDA_CHECK(cudaGetLastError());
          const double append = median_us(10, iters, [&](int) {
            caches[0]->append(reinterpret_cast<uint16_t*>(k1.ptr), reinterpret_cast<uint16_t*>(v1.ptr), pos.ptr, 1);
          });
          VQ_CUDA_CHECK(cudaDeviceSynchronize());
          std::fprintf(out, "{\"kind\": \"append\", \"method\": \"%s\", \"batch\": %zu, \"seq\": %zu, \"us\": %.3f}\n",
                       m.name, batch, seq, append);
          std::fflush(out);
          std::printf("%-8s B=%zu S=%-6zu attend %9.1f us %7.0f GB/s  append %6.1f us\n", m.name, batch, seq,
                      attend, read / attend / 1e3, append);
          std::fflush(stdout);
        }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "veloxquant_cuda_bench: %s\n", e.what());
    std::fclose(out);
    return 1;
  }
  std::fclose(out);
  return 0;
}
