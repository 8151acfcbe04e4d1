// CacheGen's coder speed: encode and decode of one 4096-token stream (head_dim 128, 4 bits,
// blocks of 64), keys and values of the synthetic workload (eval/synthetic_kv.h) and a slowly
// varying stream, the case token-wise deltas are for. Counters: tokens/s and the share of
// blocks that the rANS coder kept (the rest fell back to raw codes).
//   build/bench/veloxquant_bench_cachegen --benchmark_repetitions=5 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "codecs/cachegen/cachegen_codec.h"
#include "eval/synthetic_kv.h"

namespace veloxquant::cachegen {
namespace {

constexpr size_t kTokens = 4096, kDim = 128;

enum Source { SyntheticKeys, SyntheticValues, SmoothKeys, SmoothValues };

std::vector<float> stream(Source s) {
  if (s == SyntheticKeys || s == SyntheticValues) {
    const SyntheticKV w = make_synthetic_kv(kTokens, 1, kDim, 1, 1, 2);
    return s == SyntheticKeys ? w.keys : w.values;
  }
  std::vector<float> x(kTokens * kDim);
  for (size_t t = 0; t < kTokens; ++t)
    for (size_t c = 0; c < kDim; ++c)
      x[t * kDim + c] = static_cast<float>((1 + c % 4) * std::sin(0.02 * double(t) + double(c)));
  return x;
}

CachegenCodec codec_for(Source s) {
  return CachegenCodec(s == SyntheticKeys || s == SmoothKeys ? Stream::Keys : Stream::Values, kDim, 4, 64, 32);
}

void BM_Encode(benchmark::State& state) {
  const auto s = static_cast<Source>(state.range(0));
  const CachegenCodec codec = codec_for(s);
  const std::vector<float> x = stream(s);
  std::vector<uint8_t> codes(codec.code_bytes(kTokens));
  for (auto _ : state) {
    codec.encode(x.data(), kTokens, codes.data());
    benchmark::DoNotOptimize(codes.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(double(kTokens), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["rans_blocks"] = double(codec.rans_blocks(codes.data(), kTokens)) / double(kTokens / 64);
}

void BM_Decode(benchmark::State& state) {
  const auto s = static_cast<Source>(state.range(0));
  const CachegenCodec codec = codec_for(s);
  const std::vector<float> x = stream(s);
  std::vector<uint8_t> codes(codec.code_bytes(kTokens));
  codec.encode(x.data(), kTokens, codes.data());
  std::vector<float> y(x.size());
  for (auto _ : state) {
    codec.decode(codes.data(), kTokens, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(double(kTokens), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["rans_blocks"] = double(codec.rans_blocks(codes.data(), kTokens)) / double(kTokens / 64);
}

// 0 synthetic keys, 1 synthetic values, 2 smooth keys, 3 smooth values.
BENCHMARK(BM_Encode)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Decode)->DenseRange(0, 3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace veloxquant::cachegen

BENCHMARK_MAIN();
