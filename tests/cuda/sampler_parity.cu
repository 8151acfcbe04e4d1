// Parity of the GPU sampler (veloxquant/cuda_sampler.h) with the host's Sampler::pick: for each
// case, rows of random logits (some on a coarse grid, so that equal logits compete for the top
// places), a host Sampler per row making the requests, and every token the GPU picks must be the
// one the host picks from the same request.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "sampler_parity.h"
#include "veloxquant/cuda_sampler.h"
#include "veloxquant/error.h"
#include "veloxquant/sampler.h"

namespace {

using veloxquant::SampleRequest;
using veloxquant::Sampler;
using veloxquant::SamplerOptions;

struct SamplerCase {
  std::string name;
  size_t vocab;
  SamplerOptions options;
  bool ties;  // logits on a grid of 0.25
};

struct SamplerResult {
  size_t picks = 0, differing = 0, distinct = 0;
};

SamplerResult run_sampler_case(const SamplerCase& k, std::mt19937& gen) {
  constexpr size_t kRows = 3, kCalls = 60;
  veloxquant::cuda::DeviceSampler device(k.vocab, kRows);
  std::vector<Sampler> samplers;
  for (size_t r = 0; r < kRows; ++r) {
    SamplerOptions o = k.options;
    o.seed = gen();
    samplers.emplace_back(o);
  }
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(kRows * k.vocab);
  SamplerResult result;
  std::vector<int32_t> seen;
  for (size_t call = 0; call < kCalls; ++call) {
    for (float& l : logits) l = k.ties ? std::round(normal(gen) * 4.0f) / 4.0f : normal(gen);
    std::vector<SampleRequest> requests;
    for (Sampler& s : samplers) requests.push_back(s.request());
    const std::vector<int32_t> gpu = device.sample_host(logits, requests);
    for (size_t r = 0; r < kRows; ++r) {
      const std::span<const float> row(&logits[r * k.vocab], k.vocab);
      const int32_t host = Sampler::pick(row, requests[r]);
      result.differing += gpu[r] != host;
      ++result.picks;
      samplers[r].accept(host);
      seen.push_back(host);
    }
  }
  std::sort(seen.begin(), seen.end());
  result.distinct = static_cast<size_t>(std::unique(seen.begin(), seen.end()) - seen.begin());
  return result;
}

}  // namespace

bool run_sampler_parity(std::mt19937& gen) {
  const SamplerOptions greedy{.temperature = 0.0f};
  const SamplerOptions greedy_penalty{.temperature = 0.0f, .repeat_penalty = 1.3f};
  const SamplerOptions defaults{};  // 0.8, top_k 40, top_p 0.95
  const SamplerOptions full{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f};
  const SamplerOptions nucleus{.temperature = 0.7f, .top_k = 0, .top_p = 0.5f, .repeat_penalty = 1.2f};
  const SamplerOptions wide{.temperature = 1.3f, .top_k = 2000, .top_p = 0.9f, .repeat_penalty = 1.5f};
  const std::vector<SamplerCase> cases = {
      {"greedy v7 ties", 7, greedy, true},
      {"greedy+penalty v32000", 32000, greedy_penalty, false},
      {"greedy v128256 ties", 128256, greedy, true},
      {"default v7 ties", 7, defaults, true},
      {"default v32000", 32000, defaults, false},
      {"default v128256 ties", 128256, defaults, true},
      {"T1 all v32000", 32000, full, false},
      {"T1 all v128256 ties", 128256, full, true},
      {"top_p 0.5 penalty v32000 ties", 32000, nucleus, true},
      {"top_k 2000 top_p 0.9 penalty v128256", 128256, wide, false},
  };
  bool ok = true;
  std::printf("| sampler case | picks | differing from host | distinct tokens | result |\n");
  std::printf("| --- | ---: | ---: | ---: | --- |\n");
  for (const SamplerCase& k : cases) {
    try {
      const SamplerResult r = run_sampler_case(k, gen);
      const bool pass = r.differing == 0;
      ok = ok && pass;
      std::printf("| %s | %zu | %zu | %zu | %s |\n", k.name.c_str(), r.picks, r.differing, r.distinct,
                  pass ? "pass" : "FAIL");
    } catch (const std::exception& e) {
      ok = false;
      std::printf("| %s | error: %s | | | FAIL |\n", k.name.c_str(), e.what());
    }
    std::fflush(stdout);
  }
  // Refusals: a draw outside [0, 1), an option the host Sampler refuses, more rows than made for.
  veloxquant::cuda::DeviceSampler small(7, 1);
  const std::vector<float> row(7, 0.0f), two_rows(14, 0.0f);
  SampleRequest bad_draw{full, {}, 1.0}, bad_top_p{SamplerOptions{.top_p = 0.0f}, {}, 0.5};
  const std::vector<SampleRequest> one_of_each[] = {{bad_draw}, {bad_top_p}, {SampleRequest{}, SampleRequest{}}};
  const std::vector<float>* inputs[] = {&row, &row, &two_rows};
  size_t refused = 0;
  for (size_t i = 0; i < 3; ++i) {
    try {
      small.sample_host(*inputs[i], one_of_each[i]);
    } catch (const veloxquant::Error& e) {
      ++refused;
      std::printf("refused as expected: %s\n", e.what());
    }
  }
  ok = ok && refused == 3;
  std::printf("sampler refusals: %zu of 3\n\n", refused);
  return ok;
}
