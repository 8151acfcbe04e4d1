// streaming_llm on the GPU: a cache that keeps its sinks and the newest tokens within a budget
// (CacheConfig::budget) must attend after every step as the CPU cache with the same spec does,
// store the same bytes, and keep the same codes, while the sequence runs several budgets past.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "parity_util.h"
#include "veloxquant/cache.h"
#include "veloxquant/cuda.h"
#include "veloxquant/method.h"
#include "veloxquant/tensor.h"

namespace vq = veloxquant;
namespace vc = veloxquant::cuda;
using vc::parity::DeviceBuffer;

namespace {

constexpr size_t kBatch = 2, kKvHeads = 2, kGroupHeads = 4, kChunk = 48, kChunks = 12, kDecode = 40;

using vc::parity::SpecAtDim;

class StreamingGpu : public testing::TestWithParam<SpecAtDim> {
 public:
  static void SetUpTestSuite() {
    std::printf("\n| streaming_llm cache (prompt steps of %zu, then single tokens) | tokens | bytes stored, "
                "GPU = CPU | attention err vs CPU | bound |\n| --- | ---: | ---: | ---: | ---: |\n",
                kChunk);
  }
};

// The CPU's stream next to the GPU's download: the same kept codes and fp16 rows.
void expect_same_stream(const vc::HostStream& gpu, const vq::CacheStream& cpu, const std::string& what) {
  EXPECT_EQ(gpu.encoded, cpu.encoded) << what;
  EXPECT_EQ(gpu.tail_tokens, cpu.tail_tokens) << what;
  EXPECT_TRUE(gpu.codes == cpu.codes) << what << ": the codes differ";
  EXPECT_TRUE(gpu.tail == cpu.tail) << what << ": the fp16 rows differ";
}

TEST_P(StreamingGpu, EvictsAndAttendsAsTheCpuCache) {
  const SpecAtDim& w = GetParam();
  const size_t d = w.dim, qh = kKvHeads * kGroupHeads, row = qh * d, total = kChunk * kChunks + kDecode;
  const vq::LayerShape shape{kKvHeads, d, 3, 42};
  vq::RopeParams rope;
  rope.dims = static_cast<uint32_t>(d);
  vc::CacheConfig config = vc::device_cache_config(vq::parse_spec(w.spec), shape, kBatch, total);
  config.rope = rope;  // keys come before RoPE, as the GPU runtime hands them to an evicting cache
  config.max_append = kChunk;
  vc::DeviceCache gpu(config);
  std::vector<vq::KVCache> cpu;
  for (size_t b = 0; b < kBatch; ++b) cpu.emplace_back(w.spec, shape);
  const std::string name = std::string(w.spec) + std::to_string(d);
  std::seed_seq seed(name.begin(), name.end());
  std::mt19937 gen(seed);
  const double bound = config.format == "fp16" ? 1e-3 : 2e-3;

  double worst = 0;
  bool all_written = true, same_bytes = true;
  for (size_t step = 0; gpu.tokens() < total; ++step) {
    const size_t n = step < kChunks ? kChunk : 1, first = gpu.tokens();
    const auto keys = vc::parity::random_rows(gen, kBatch * kKvHeads, n, d, true);
    const auto values = vc::parity::random_rows(gen, kBatch * kKvHeads, n, d, false);
    std::vector<int64_t> positions(kBatch * n);
    for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int64_t>(first + i % n);
    const DeviceBuffer<uint16_t> dk(keys), dv(values);
    const DeviceBuffer<int64_t> dp(positions);
    gpu.append(dk.ptr, dv.ptr, dp.ptr, n);
    std::vector<uint16_t> q;
    const std::vector<float> out = vc::parity::poisoned_attend(gen, q, n * kBatch * row, all_written,
                                                               [&](const uint16_t* dq, float* dout) {
                                                                 gpu.attend_causal(dq, n, qh, dout);
                                                               });
    gpu.finish_step();
    std::vector<float> ref(out.size()), seq_ref(n * row);
    std::vector<uint16_t> seq_q(n * row);
    size_t cpu_bytes = 0;
    for (size_t b = 0; b < kBatch; ++b) {
      const auto kb = vc::parity::cpu_rows(keys, kKvHeads, b, n, d),
                 vb = vc::parity::cpu_rows(values, kKvHeads, b, n, d);
      cpu[b].append(vq::TensorView::f16(kb.data(), {n, kKvHeads, d}),
                    vq::TensorView::f16(vb.data(), {n, kKvHeads, d}), std::span(positions).subspan(b * n, n),
                    rope);
      for (size_t i = 0; i < n; ++i)
        std::copy_n(q.data() + (i * kBatch + b) * row, row, seq_q.data() + i * row);
      cpu[b].attend(vq::TensorView::f16(seq_q.data(), {n, qh, d}), seq_ref.data(), vq::AttendPath::Reference);
      cpu[b].finish_step();
      for (size_t i = 0; i < n; ++i)
        std::copy_n(seq_ref.data() + i * row, row, ref.data() + (i * kBatch + b) * row);
      cpu_bytes += cpu[b].key_bytes() + cpu[b].value_bytes();
    }
    worst = std::max(worst, vc::parity::normalized_error(out, ref));
    same_bytes = same_bytes && gpu.stored_bytes() == cpu_bytes;
    EXPECT_EQ(gpu.stored_bytes(), cpu_bytes) << "after step " << step;
  }
  size_t cpu_bytes = 0;
  for (const vq::KVCache& c : cpu) cpu_bytes += c.key_bytes() + c.value_bytes();
  std::printf("| %s, head_dim %zu | %zu | %zu, %s | %.2e | %.0e |\n", w.spec, d, total, gpu.stored_bytes(),
              same_bytes ? "every step" : "NOT every step", worst, bound);
  EXPECT_LE(worst, bound);
  EXPECT_TRUE(all_written);
  for (size_t b = 0; b < kBatch; ++b)
    for (size_t h = 0; h < kKvHeads; ++h) {
      const std::string at = "sequence " + std::to_string(b) + ", head " + std::to_string(h);
      expect_same_stream(gpu.download_keys(b, h), cpu[b].key_streams()[h], "keys of " + at);
      expect_same_stream(gpu.download_values(b, h), cpu[b].value_streams()[h], "values of " + at);
    }
  // As on the CPU, an evicting cache's streams are not restored.
  std::vector<vc::HostStream> none(kBatch * kKvHeads);
  EXPECT_THROW(gpu.upload(0, none, none), vq::Error);
}

INSTANTIATE_TEST_SUITE_P(
    Formats, StreamingGpu,
    testing::Values(SpecAtDim{"streaming_llm:budget=96,sinks=4", 128},
                    SpecAtDim{"streaming_llm:budget=64,sinks=0", 64},
                    SpecAtDim{"streaming_llm:budget=200,sinks=4+kivi:kbits=2,vbits=2", 128},
                    SpecAtDim{"streaming_llm:budget=120,sinks=2+kivi:kbits=4,vbits=4,group=64,residual=32",
                              80},
                    SpecAtDim{"streaming_llm:budget=100,sinks=4+turboquant_mse:bits=4,vbits=4", 256},
                    SpecAtDim{"streaming_llm:budget=180,sinks=4+qjl", 128}),
    vc::parity::case_name);

}  // namespace
