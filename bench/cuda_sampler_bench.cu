// Sampling the next token on the GPU (cuda::DeviceSampler) against the host path it replaces:
// copying each row's logits to the host and running Sampler::pick there. Both start from logits
// in GPU memory, where the decoder leaves them, and end with the token ids on the host; each is
// timed as one host call (wall clock, std::chrono), since a decode step waits for it whole.
// Vocabularies of 32000 (Llama 2) and 128256 (Llama 3), 1 and 8 rows, three option sets: greedy,
// the defaults (temperature 0.8, top-k 40, top-p 0.95) and temperature 1 over the whole vocabulary.
// Writes OUT_DIR/cuda_sampler.json and OUT_DIR/cuda_sampler.md.
//
//   veloxquant_cuda_sampler_bench --out OUT_DIR [--iters N>=50]
//
// Each timing is the median of N calls after warm-up; each GPU pick is checked against the host's.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cuda/common/check.cuh"
#include "cuda/common/device_array.cuh"
#include "cuda_bench_util.cuh"
#include "veloxquant/cuda_sampler.h"
#include "veloxquant/sampler.h"

namespace {

using veloxquant::SampleRequest;
using veloxquant::Sampler;
using veloxquant::SamplerOptions;
using veloxquant::cuda::DeviceArray;

struct Row {
  std::string options;
  size_t vocab, rows;
  double gpu_us, host_us;
  bool agree;
};

template <class F>
double median_wall_us(int iters, F&& f) {
  for (int i = 0; i < 5; ++i) f();
  std::vector<double> us(iters);
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    us[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  std::nth_element(us.begin(), us.begin() + iters / 2, us.end());
  return us[iters / 2];
}

Row bench(const std::string& name, const SamplerOptions& options, size_t vocab, size_t rows, int iters) {
  std::mt19937 gen(static_cast<unsigned>(vocab + rows));
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> host(vocab * rows);
  for (float& l : host) l = normal(gen);
  const DeviceArray<float> logits(host.data(), host.size());
  std::vector<SampleRequest> requests;
  for (size_t r = 0; r < rows; ++r) {
    Sampler s(SamplerOptions{options.temperature, options.top_k, options.top_p, options.repeat_penalty,
                             options.repeat_last_n, r + 1});
    requests.push_back(s.request());
  }
  veloxquant::cuda::DeviceSampler device(vocab, rows);
  std::vector<int32_t> gpu, cpu(rows);
  std::vector<float> copied(vocab * rows);
  Row out{name, vocab, rows, 0, 0, false};
  out.gpu_us = median_wall_us(iters, [&] { gpu = device.sample(logits.ptr, vocab, requests); });
  out.host_us = median_wall_us(iters, [&] {
    VQ_CUDA_CHECK(cudaMemcpy(copied.data(), logits.ptr, copied.size() * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t r = 0; r < rows; ++r) cpu[r] = Sampler::pick(std::span(&copied[r * vocab], vocab), requests[r]);
  });
  out.agree = gpu == cpu;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out_dir;
  int iters = 200;
  if (!veloxquant::cuda::bench::parse_out_and_iters(argc, argv, out_dir, iters)) return 2;
  const std::pair<std::string, SamplerOptions> option_sets[] = {
      {"greedy", SamplerOptions{.temperature = 0.0f}},
      {"T 0.8, top-k 40, top-p 0.95", SamplerOptions{}},
      {"T 1, whole vocabulary", SamplerOptions{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f}},
  };
  std::vector<Row> rows;
  cudaDeviceProp prop{};
  try {
    VQ_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    for (size_t vocab : {size_t{32000}, size_t{128256}})
      for (size_t batch : {size_t{1}, size_t{8}})
        for (const auto& [name, options] : option_sets) {
          rows.push_back(bench(name, options, vocab, batch, iters));
          const Row& w = rows.back();
          std::printf("%-28s vocab %-6zu rows %zu  gpu %8.1f us  host %8.1f us  %5.2fx  %s\n", name.c_str(), vocab,
                      batch, w.gpu_us, w.host_us, w.host_us / w.gpu_us, w.agree ? "same tokens" : "TOKENS DIFFER");
          std::fflush(stdout);
        }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "veloxquant_cuda_sampler_bench: %s\n", e.what());
    return 1;
  }
  const std::string date = veloxquant::cuda::bench::utc_now();
  const veloxquant::cuda::bench::ResultFiles files(out_dir, "cuda_sampler", "veloxquant_cuda_sampler_bench");
  if (!files.ok()) return 2;
  FILE* json = files.json;
  FILE* md = files.md;
  std::fprintf(json, "{\n  \"command\": \"veloxquant_cuda_sampler_bench --out OUT_DIR --iters %d\",\n  \"gpu\": \"%s\",\n"
               "  \"date\": \"%s\",\n  \"rows\": [\n", iters, prop.name, date.c_str());
  std::fprintf(md, "# Sampling on the GPU against copying the logits to the host\n\n"
               "`veloxquant_cuda_sampler_bench --out OUT_DIR --iters %d`, %s, %s. From logits in GPU memory to token "
               "ids on the host: the GPU sampler (cuda::DeviceSampler) against a copy of the rows to the host and "
               "Sampler::pick. Median of %d calls, wall clock of the whole call. \"Same tokens\": every row's GPU pick "
               "equals the host's.\n\n"
               "| options | vocab | rows | GPU µs | host µs | speed-up | same tokens |\n"
               "| --- | ---: | ---: | ---: | ---: | ---: | --- |\n",
               iters, prop.name, date.c_str(), iters);
  bool all_agree = true;
  for (size_t r = 0; r < rows.size(); ++r) {
    const Row& w = rows[r];
    all_agree = all_agree && w.agree;
    std::fprintf(json, "    {\"options\": \"%s\", \"vocab\": %zu, \"rows\": %zu, \"gpu_us\": %.2f, \"host_us\": %.2f, "
                 "\"speedup\": %.3f, \"same_tokens\": %s}%s\n", w.options.c_str(), w.vocab, w.rows, w.gpu_us, w.host_us,
                 w.host_us / w.gpu_us, w.agree ? "true" : "false", r + 1 < rows.size() ? "," : "");
    std::fprintf(md, "| %s | %zu | %zu | %.1f | %.1f | %.2fx | %s |\n", w.options.c_str(), w.vocab, w.rows, w.gpu_us,
                 w.host_us, w.host_us / w.gpu_us, w.agree ? "yes" : "NO");
  }
  std::fprintf(json, "  ]\n}\n");
  return all_agree ? 0 : 1;
}
