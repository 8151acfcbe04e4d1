// A sliding-window layer whose appends are bounded (CacheConfig::max_append, as the GPU runtime
// sets it) keeps the codes of its window and one append only, overwriting the older blocks in
// place: its causal attention after every chunk of a sequence several times that span must still
// equal the CPU cache's (which keeps every token and masks), and its bytes must stay bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "parity_util.h"
#include "veloxquant/cache.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"
#include "veloxquant/tensor.h"

namespace vq = veloxquant;
namespace vc = veloxquant::cuda;
using vc::parity::DeviceBuffer;

namespace {

constexpr size_t kBatch = 2, kKvHeads = 2, kGroupHeads = 4, kWindow = 100, kChunk = 48, kChunks = 40;

using vc::parity::SpecAtDim;

class WindowedCodes : public testing::TestWithParam<SpecAtDim> {
 public:
  static void SetUpTestSuite() {
    std::printf("\n| windowed layer, codes bounded (window %zu, appends of %zu) | tokens | bytes stored | "
                "attention err vs CPU | bound |\n",
                kWindow, kChunk);
    std::printf("| --- | ---: | --- | ---: | ---: |\n");
  }
};

TEST_P(WindowedCodes, WrapAndAttendAsTheCpuCache) {
  const SpecAtDim& w = GetParam();
  const size_t d = w.dim, qh = kKvHeads * kGroupHeads, row = qh * d, total = kChunk * kChunks + 8;
  vq::LayerShape shape{kKvHeads, d, 3, 42};
  shape.window = kWindow;
  vc::CacheConfig config = vc::device_cache_config(vq::parse_spec(w.spec), shape, kBatch, total);
  config.max_append = kChunk;
  vc::DeviceCache gpu(config);
  std::vector<vq::KVCache> cpu;
  for (size_t b = 0; b < kBatch; ++b) cpu.emplace_back(w.spec, shape);
  const std::string name = std::string(w.spec) + std::to_string(d);
  std::seed_seq seed(name.begin(), name.end());
  std::mt19937 gen(seed);
  const double bound = config.format == "kivi" || config.format == "qjl" || config.format == "kitty" ? 2e-3
                                                                                                     : 1e-3;

  double worst = 0;
  bool all_written = true;
  for (size_t step = 0; gpu.tokens() < total; ++step) {
    const size_t n = step < kChunks ? kChunk : 1;
    const auto keys = vc::parity::random_rows(gen, kBatch * kKvHeads, n, d, true);
    const auto values = vc::parity::random_rows(gen, kBatch * kKvHeads, n, d, false);
    const DeviceBuffer<uint16_t> dk(keys), dv(values);
    gpu.append(dk.ptr, dv.ptr, nullptr, n);
    std::vector<uint16_t> q;
    const std::vector<float> out = vc::parity::poisoned_attend(gen, q, n * kBatch * row, all_written,
                                                               [&](const uint16_t* dq, float* dout) {
                                                                 gpu.attend_causal(dq, n, qh, dout);
                                                               });
    std::vector<float> ref(out.size()), seq_ref(n * row);
    std::vector<uint16_t> seq_q(n * row);
    for (size_t b = 0; b < kBatch; ++b) {
      const auto kb = vc::parity::cpu_rows(keys, kKvHeads, b, n, d),
                 vb = vc::parity::cpu_rows(values, kKvHeads, b, n, d);
      cpu[b].append(vq::TensorView::f16(kb.data(), {n, kKvHeads, d}),
                    vq::TensorView::f16(vb.data(), {n, kKvHeads, d}));
      for (size_t i = 0; i < n; ++i)
        std::copy_n(q.data() + (i * kBatch + b) * row, row, seq_q.data() + i * row);
      cpu[b].attend(vq::TensorView::f16(seq_q.data(), {n, qh, d}), seq_ref.data(), vq::AttendPath::Reference);
      for (size_t i = 0; i < n; ++i)
        std::copy_n(seq_ref.data() + i * row, row, ref.data() + (i * kBatch + b) * row);
    }
    worst = std::max(worst, vc::parity::normalized_error(out, ref));
  }
  std::printf("| %s, head_dim %zu | %zu | GPU %zu, CPU (every token) %zu | %.2e | %.0e |\n", w.spec, d, total,
              gpu.stored_bytes(), (cpu[0].key_bytes() + cpu[0].value_bytes()) * kBatch, worst, bound);
  EXPECT_LE(worst, bound);
  EXPECT_TRUE(all_written);
  // The codes hold the window and one append (a few hundred tokens), not the 1928 of the sequence.
  EXPECT_LT(2 * gpu.stored_bytes(), (cpu[0].key_bytes() + cpu[0].value_bytes()) * kBatch);
  // Past the bound an append is refused; so is a copy of streams whose oldest codes are gone.
  const DeviceBuffer<uint16_t> big(kBatch * kKvHeads * (kChunk + 1) * d);
  EXPECT_THROW(gpu.append(big.ptr, big.ptr, nullptr, kChunk + 1), vq::Error);
  EXPECT_THROW(gpu.download_keys(0, 0), vq::Error);
}

INSTANTIATE_TEST_SUITE_P(Formats, WindowedCodes,
                         testing::Values(SpecAtDim{"fp16", 128}, SpecAtDim{"kivi:kbits=2,vbits=2", 128},
                                         SpecAtDim{"kivi:kbits=4,vbits=4,group=64", 80},
                                         SpecAtDim{"turboquant_mse:bits=4,vbits=4", 256},
                                         SpecAtDim{"qjl", 128}, SpecAtDim{"kitty:group=64", 96}),
                         vc::parity::case_name);

}  // namespace
