// streaming_llm on the CUDA backend, the parts that need no GPU: its CacheConfig, what it refuses,
// and where an evicting device cache cuts its stream (cuda/eviction/streaming_cut.h), step by step
// against the CPU cache itself.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "cuda/eviction/streaming_cut.h"
#include "expect_error.h"
#include "veloxquant/cache.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace veloxquant {
namespace {

const LayerShape kShape{2, 128, 3, 11, 6};

cuda::CacheConfig config(const std::string& spec, const LayerShape& shape = kShape) {
  return cuda::device_cache_config(parse_spec(spec), shape, 1, 4096);
}

std::string refusal(const std::string& spec, const LayerShape& shape = kShape) {
  return test::error_message<SpecError>([&] { config(spec, shape); });
}

TEST(DeviceEviction, StreamingLlmCarriesItsBudgetSinksAndBlocks) {
  const cuda::CacheConfig c = config("streaming_llm:budget=512,sinks=8+kivi:kbits=4,vbits=4,group=64");
  EXPECT_EQ(c.format, "kivi");
  EXPECT_EQ(c.budget, 512u);
  EXPECT_EQ(c.sinks, 8u);
  EXPECT_EQ(c.block, 64u);
  const cuda::CacheConfig alone = config("streaming_llm:budget=100");
  EXPECT_EQ(alone.format, "fp16");
  EXPECT_EQ(alone.block, 1u);
  EXPECT_EQ(alone.sinks, 4u);  // the policy's default
  EXPECT_EQ(config("streaming_llm:budget=300+qjl").block, 32u);
  EXPECT_EQ(config("kivi").budget, 0u);
  EXPECT_TRUE(cuda::supports(parse_spec("streaming_llm:budget=256+turboquant_mse:bits=4,vbits=4"), kShape));
}

TEST(DeviceEviction, RefusesWhatItCannotEvict) {
  // KIVI's 128 residual rows and a 32-token block beside 4 sinks need 164 tokens.
  EXPECT_CONTAINS(refusal("streaming_llm:budget=160+kivi"),
                  "budget 160; expected at least sinks + residual + block = 4 + 128 + 32 = 164 on the GPU");
  EXPECT_NO_THROW(config("streaming_llm:budget=164+kivi"));
  EXPECT_CONTAINS(refusal("snapkv:budget=256+kivi"),
                  "the CUDA backend evicts with streaming_llm; snapkv runs on the CPU cache");
  LayerShape windowed = kShape;
  windowed.window = 1024;
  EXPECT_CONTAINS(refusal("streaming_llm:budget=256", windowed),
                  "an evicting cache on a sliding-window layer");
  EXPECT_CONTAINS(refusal("streaming_llm:budget=256+palu"), "palu runs on the CPU cache");
  // The CPU policy's own check comes first where it applies.
  EXPECT_THROW(config("streaming_llm:budget=300,sinks=65"), SpecError);
}

// What the CPU cache holds after each step, as first_kept() predicts it from the GPU's counts:
// blocks numbered from the stream's first token ever (its evicted ones included), which fall
// where the CPU's fall on what it keeps.
struct Case {
  std::string spec;
  size_t sinks, budget, residual, key_block, value_block;
};

size_t encoded(size_t tokens, size_t residual, size_t block) {
  return tokens < residual + block ? 0 : (tokens - residual) / block * block;
}

TEST(DeviceEviction, CutsTheStreamWhereTheCpuCacheDoes) {
  const std::vector<Case> cases = {
      {"streaming_llm:budget=40,sinks=4", 4, 40, 0, 1, 1},
      {"streaming_llm:budget=70,sinks=2+kivi:kbits=2,vbits=2,group=32,residual=32", 2, 70, 32, 32, 4},
      {"streaming_llm:budget=164+kivi:kbits=2,vbits=2", 4, 164, 128, 32, 4},
      {"streaming_llm:budget=50,sinks=0+kivi:kbits=4,vbits=4,group=16,residual=8", 0, 50, 8, 16, 4},
      {"streaming_llm:budget=90,sinks=3+qjl:residual=16", 3, 90, 16, 32, 4},
  };
  const LayerShape shape{1, 64, 0, 7, 1};
  std::mt19937 gen(5);
  std::normal_distribution<float> normal;
  for (const Case& c : cases) {
    KVCache cpu(c.spec, shape);
    size_t tokens = 0, dropped = 0;
    for (int step = 0; step < 60; ++step) {
      const size_t n = step % 7 == 0 ? 1 + gen() % 40 : 1;
      std::vector<float> k(n * 64), v(n * 64);
      for (float& x : k) x = normal(gen);
      for (float& x : v) x = normal(gen);
      cpu.append(TensorView::f32(k.data(), {n, 1, 64}), TensorView::f32(v.data(), {n, 1, 64}));
      cpu.finish_step();
      tokens += n;
      const size_t stream = tokens - std::min(tokens, c.sinks), held = std::min(tokens, c.sinks);
      const cuda::StreamCut cut{stream,
                                dropped,
                                encoded(stream, c.residual, c.key_block),
                                encoded(stream, c.residual, c.value_block),
                                c.key_block,
                                c.value_block};
      dropped = cuda::first_kept(cut, c.budget - held);
      const std::string at = c.spec + ", step " + std::to_string(step);
      ASSERT_EQ(cpu.stored_tokens(0), held + stream - dropped) << at;
      ASSERT_EQ(cpu.key_streams()[0].encoded, cut.key_encoded - dropped) << at;
      ASSERT_EQ(cpu.value_streams()[0].encoded, cut.value_encoded - dropped) << at;
    }
    EXPECT_GT(dropped, 0u) << c.spec << ": the steps never filled the budget";
  }
}

}  // namespace
}  // namespace veloxquant
