// Decode attention over a long compressed cache vs the fp16 cache, one core: one query token,
// G query heads sharing one KV head (4 by default: grouped-query attention; 1 is multi-head
// attention), head_dim 128, S cached tokens. Every method is measured in the same run so the
// ratios are side by side.
//   veloxquant_bench_attend [--tokens=32768] [--query-heads=4] [--spec=SPEC ...] [google-benchmark flags]
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "eval/synthetic_kv.h"
#include "veloxquant/cache.h"
#include "veloxquant/threads.h"

namespace {
using namespace veloxquant;

constexpr size_t kDim = 128;

void attend(benchmark::State& state, const std::string& spec, size_t tokens, size_t query_heads) {
  const SyntheticKV w = make_synthetic_kv(tokens, 1, kDim, query_heads, 1, 1);
  KVCache cache(spec, with_synthetic_calibration(parse_spec(spec), LayerShape{1, kDim, 0, 1}, 1));
  for (size_t t = 0; t < tokens; t += 1024) {
    const size_t n = std::min<size_t>(1024, tokens - t);
    cache.append(TensorView::f32(w.keys.data() + t * kDim, {n, 1, kDim}),
                 TensorView::f32(w.values.data() + t * kDim, {n, 1, kDim}));
  }
  std::vector<float> out(query_heads * kDim);
  const TensorView q = TensorView::f32(w.queries.data(), {1, query_heads, kDim});
  for (auto _ : state) {
    cache.attend(q, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["bytes"] = static_cast<double>(cache.bytes());
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
}

void encode(benchmark::State& state, const std::string& spec, size_t tokens) {
  const SyntheticKV w = make_synthetic_kv(tokens, 1, kDim, 1, 1, 1);
  for (auto _ : state) {
    KVCache cache(spec, with_synthetic_calibration(parse_spec(spec), LayerShape{1, kDim, 0, 1}, 1));
    cache.append(TensorView::f32(w.keys.data(), {tokens, 1, kDim}),
                 TensorView::f32(w.values.data(), {tokens, 1, kDim}));
    benchmark::DoNotOptimize(cache.bytes());
  }
  state.counters["tokens_per_s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  set_threads(1);
  size_t tokens = 32768, query_heads = 4;
  std::vector<std::string> specs;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--tokens=", 9) == 0) tokens = std::stoul(argv[i] + 9);
    else if (std::strncmp(argv[i], "--query-heads=", 14) == 0) query_heads = std::stoul(argv[i] + 14);
    else if (std::strncmp(argv[i], "--spec=", 7) == 0) specs.emplace_back(argv[i] + 7);
    else rest.push_back(argv[i]);
  }
  if (specs.empty()) {
    specs = {"fp16", "kivi:kbits=2,vbits=2,residual=128", "kivi:kbits=4,vbits=4,residual=128"};
    for (const auto& m : registered_methods())
      if (m.name != "fp16" && m.name != "kivi") specs.push_back(m.name);
  }
  for (const auto& s : specs) {
    const std::string canonical = parse_spec(s).to_string();
    benchmark::RegisterBenchmark(("attend/" + canonical).c_str(), attend, canonical, tokens, query_heads)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("encode/" + canonical).c_str(), encode, canonical, size_t{4096})
        ->Unit(benchmark::kMillisecond);
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
