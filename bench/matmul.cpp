// The runtime's weight products on every stored type: matvec (decode, one token) and matmul
// (prefill, n tokens) on stories260K's matrix shapes and a 4096 x 4096 one, 1 and 2 threads.
// GFLOP/s counts 2 rows cols n; GB/s counts the weight bytes read once per call.
//   veloxquant_bench_matmul [--tokens=N] [google-benchmark flags]
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/rng.h"
#include "runtime/weights/weight_matrix.h"
#include "veloxquant/gguf.h"
#include "veloxquant/tensor.h"
#include "veloxquant/threads.h"

namespace {
using namespace veloxquant;
using runtime::WeightMatrix;

constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                               GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q6_K};
struct Shape {
  size_t rows, cols;
};
// stories260K's ffn (172 x 64) and output (512 x 64) matrices, sizes around the threading
// thresholds, a 1B-class ffn matrix and a 7B-class attention matrix.
constexpr Shape kShapes[] = {{172, 64}, {512, 64}, {1024, 256}, {2048, 512}, {5632, 2048}, {4096, 4096}};

std::vector<uint8_t> random_weights(GgmlType type, size_t n) {
  Rng rng(42);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.normal());
  switch (type) {
    case GgmlType::Q8_0: return quantize_q8_0(v);
    case GgmlType::Q4_0: return quantize_q4_0(v);
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: break;
    default: {
      // No quantizer here: random bytes, each with bit 5 set and bit 6 clear, so that every fp16
      // scale is a normal number in [2^-7, 2).
      std::vector<uint8_t> out(n / ggml_block_elements(type) * ggml_block_bytes(type));
      for (uint8_t& b : out) b = static_cast<uint8_t>((rng.next_u64() & 0x9f) | 0x20);
      return out;
    }
  }
  const size_t width = type == GgmlType::F32 ? 4 : 2;
  std::vector<uint8_t> out(n * width);
  for (size_t i = 0; i < n; ++i) {
    if (type == GgmlType::F32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = type == GgmlType::F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

// n = 0 runs matvec, otherwise matmul with n tokens.
void product(benchmark::State& state, GgmlType type, Shape s, size_t n, int threads) {
  set_threads(threads);
  const std::vector<uint8_t> bytes = random_weights(type, s.rows * s.cols);
  const WeightMatrix w = WeightMatrix::view("w", type, s.rows, s.cols, bytes);
  const size_t tokens = n == 0 ? 1 : n;
  std::vector<float> x(tokens * s.cols, 0.5f), y(tokens * s.rows);
  for (auto _ : state) {
    if (n == 0) runtime::matvec(w, x.data(), y.data());
    else runtime::matmul(w, x.data(), n, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(s.rows * s.cols * tokens);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes.size()) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  size_t tokens = 128;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--tokens=", 9) == 0) tokens = std::stoul(argv[i] + 9);
    else rest.push_back(argv[i]);
  }
  for (GgmlType type : kTypes) {
    for (Shape s : kShapes) {
      for (size_t n : {size_t{0}, tokens}) {
        for (int threads : {1, 2}) {
          const std::string name = std::string(n == 0 ? "matvec/" : "matmul/") +
                                   ggml_type_name(type) + "/" + std::to_string(s.rows) + "x" +
                                   std::to_string(s.cols) + (n == 0 ? "" : "/n:" + std::to_string(n)) +
                                   "/threads:" + std::to_string(threads);
          benchmark::RegisterBenchmark(name.c_str(), product, type, s, n, threads)->UseRealTime();
        }
      }
    }
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
