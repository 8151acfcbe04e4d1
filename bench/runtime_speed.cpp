// Prompt-processing and generation speed of the runtime, measured the way llama.cpp's
// llama-bench measures it so the two can run side by side: random token ids, `depth` tokens put
// in the cache first (untimed), then either one batch of P tokens (ppP) or G single-token steps
// (tgG; after --tg-warmup untimed steps, which the cache's first steps at a new shape and cuBLAS's
// first calls of the step's matrix shapes would otherwise fall into). Prints one JSON object per
// test with every repetition and the median, and the rate at which the depth tokens went in (a
// prefill of that many: the same work as a ppD test). With --batch B, B sequences run in lockstep
// (on either device): every test's tokens are B times as many, each step one token of every
// sequence, and tokens/s counts all of them. With --fill-once the depth tokens go in once and the
// generation test's repetitions follow one another in that session (each starts where the last
// ended, `depth_end` says where the last one ended): a 32k-token fill costs a minute on a laptop's
// two cores, and the decode rate barely moves over the few hundred tokens the repetitions add.
//   veloxquant_bench_runtime -m MODEL [-p 512] [-n 128] [-d 0] [-t 1] [--kv fp16] [-r 5]
//       [--device cpu|cuda] [--gpu-weights f16|f32] [--warmup 1] [--tg-warmup 0] [--batch 1] [--fill-once]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "veloxquant/model.h"
#include "veloxquant/threads.h"

namespace {
using namespace veloxquant;

std::vector<int32_t> random_tokens(size_t n, size_t vocab, std::mt19937_64& rng) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, kv = "fp16", device = "cpu", gpu_weights = "f16";
  size_t prompt = 512, gen = 128, depth = 0, batch = 1;
  int threads = 1, reps = 5, warmup = 1, tg_warmup = 0;
  bool fill_once = false;
  CLI::App app{"Runtime speed in the manner of llama-bench"};
  app.add_option("-m,--model", model_path, "GGUF model")->required();
  app.add_option("-p,--prompt", prompt, "tokens in the prompt-processing test (0: skip)")->capture_default_str();
  app.add_option("-n,--gen", gen, "tokens in the generation test (0: skip)")->capture_default_str();
  app.add_option("-d,--depth", depth, "tokens already in the cache")->capture_default_str();
  app.add_option("-t,--threads", threads, "threads")->capture_default_str()->check(CLI::Range(1, 1024));
  app.add_option("--kv", kv, "KV-cache method spec")->capture_default_str();
  app.add_option("-r,--reps", reps, "repetitions")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--warmup", warmup, "untimed runs before the timed ones")->capture_default_str()->check(CLI::Range(0, 100));
  app.add_option("--device", device, "cpu or cuda")->capture_default_str();
  app.add_option("--gpu-weights", gpu_weights, "with --device cuda: f16 or f32")->capture_default_str();
  app.add_option("--tg-warmup", tg_warmup, "untimed single-token steps before a generation test's timed ones")
      ->capture_default_str()->check(CLI::Range(0, 1000));
  app.add_option("--batch", batch, "sequences in lockstep")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_flag("--fill-once", fill_once,
               "fill the depth once; the generation repetitions follow one another");
  CLI11_PARSE(app, argc, argv);
  try {
    set_threads(threads);
    const Model model = Model::load(model_path);
    const size_t vocab = model.config().vocab;
    std::mt19937_64 rng(1234);
    const size_t runs = fill_once ? static_cast<size_t>(warmup + reps) : 1;
    Session session(model, SessionOptions{kv, depth + runs * (std::max(prompt, gen) + tg_warmup) + 1,
                                          parse_device(device), parse_gpu_weights(gpu_weights), batch});
    for (const auto& [name, n] : {std::pair{"pp", prompt}, std::pair{"tg", gen}}) {
      if (n == 0) continue;
      std::vector<double> rates, depth_rates;
      const bool refill = !fill_once || std::string_view(name) == "pp";
      for (int r = 0; r < warmup + reps; ++r) {  // warm-up runs fill caches and are not kept
        if (refill || r == 0) session.reset();
        if (depth && (refill || r == 0)) {
          const std::vector<int32_t> filling = random_tokens(depth * batch, vocab, rng);
          const auto t0 = std::chrono::steady_clock::now();
          session.eval_batch(filling, Logits::None);
          const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (r >= warmup || !refill) depth_rates.push_back(static_cast<double>(depth * batch) / s);
        }
        const std::vector<int32_t> tokens = random_tokens(n * batch, vocab, rng);
        if (std::string_view(name) == "tg") {
          for (int i = 0; i < tg_warmup; ++i) session.eval_batch(std::span(tokens.data(), batch), Logits::Last);
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (std::string_view(name) == "pp") {
          session.eval_batch(tokens, Logits::Last);
        } else {
          for (size_t i = 0; i < n; ++i) session.eval_batch(std::span(&tokens[i * batch], batch), Logits::Last);
        }
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r >= warmup) rates.push_back(static_cast<double>(n * batch) / s);
      }
      nlohmann::ordered_json j;
      j["test"] = fmt::format("{}{}", name, n);
      j["depth"] = depth;
      if (!refill) j["depth_end"] = session.position();
      j["batch"] = batch;
      if (std::string_view(name) == "tg") j["tg_warmup"] = tg_warmup;
      j["threads"] = threads;
      j["device"] = device;
      if (device == "cuda") j["gpu_weights"] = gpu_weights;
      j["kv"] = kv;
      j["kv_bytes"] = session.kv_bytes();
      j["kv_fp16_bytes"] = session.kv_fp16_bytes();
      j["tokens_per_s"] = rates;
      j["median_tokens_per_s"] = median(rates);
      if (depth) j["median_depth_tokens_per_s"] = median(depth_rates);
      fmt::print("{}\n", j.dump());
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "veloxquant_bench_runtime: error: {}\n", e.what());
    return 2;
  }
  return 0;
}
