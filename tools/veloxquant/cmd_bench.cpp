// `veloxquant bench`: one method (or all) on the synthetic KV workload.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "eval/kv_bench.h"
#include "veloxquant/method.h"

namespace veloxquant::cli {
namespace {

nlohmann::ordered_json to_json(const KVBenchResult& r) {
  nlohmann::ordered_json j;
  j["method"] = r.method;
  j["spec"] = r.spec;
  j["fp16_bytes"] = r.fp16_bytes;
  j["k_bytes"] = r.k_bytes;
  j["v_bytes"] = r.v_bytes;
  j["compression_ratio"] = r.compression_ratio;
  j["key_mse"] = r.key_mse;
  j["key_cosine"] = r.key_cosine;
  j["value_mse"] = r.value_mse;
  j["attn_rel_err"] = r.attn_rel_err;
  j["encode_tokens_per_s"] = r.encode_tokens_per_s;
  j["attend_tokens_per_s"] = r.attend_tokens_per_s;
  return j;
}

struct BenchArgs {
  std::string kv = "all";
  KVBenchOptions opt;
  bool json = false;
};

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Run methods on a synthetic KV workload (outlier key "
                                          "channels, heavy-tailed values, an attention sink)");
  cmd->add_option("--kv", args->kv, "method spec, e.g. kivi:kbits=2,vbits=2, or 'all'")
      ->capture_default_str();
  cmd->add_option("--tokens", args->opt.tokens, "cached tokens")->capture_default_str()->check(CLI::Range(1, 1 << 22));
  cmd->add_option("--heads", args->opt.kv_heads, "KV heads")->capture_default_str()->check(CLI::Range(1, 256));
  cmd->add_option("--head-dim", args->opt.head_dim, "head dimension")->capture_default_str()->check(CLI::Range(2, 1024));
  cmd->add_option("--q-per-kv", args->opt.q_per_kv, "query heads per KV head")->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--seed", args->opt.seed, "random seed")->capture_default_str();
  cmd->add_flag("--json", args->json, "print JSON (one object, or an array for --kv all)");
  return [args] {
    std::vector<std::string> specs;
    if (args->kv == "all") {
      for (const auto& m : registered_methods()) specs.push_back(m.name);
    } else {
      specs.push_back(args->kv);
    }
    std::vector<KVBenchResult> results;
    for (const auto& s : specs) results.push_back(run_kv_bench(s, args->opt));
    if (args->json) {
      if (args->kv == "all") {
        nlohmann::ordered_json arr = nlohmann::ordered_json::array();
        for (const auto& r : results) arr.push_back(to_json(r));
        fmt::print("{}\n", arr.dump(2));
      } else {
        fmt::print("{}\n", to_json(results[0]).dump(2));
      }
      return;
    }
    const auto& o = args->opt;
    fmt::print("synthetic KV: {} tokens, {} KV heads, head_dim {}, {} query heads per KV head, seed {}\n\n",
               o.tokens, o.kv_heads, o.head_dim, o.q_per_kv, o.seed);
    fmt::print("{:<16} {:>11} {:>11} {:>7} {:>10} {:>8} {:>10} {:>9} {:>11} {:>11}\n", "method",
               "k_bytes", "v_bytes", "ratio", "key_mse", "key_cos", "value_mse", "attn_err",
               "enc tok/s", "attn tok/s");
    for (const auto& r : results) {
      fmt::print("{:<16} {:>11} {:>11} {:>7.2f} {:>10.4g} {:>8.4f} {:>10.4g} {:>9.4f} {:>11.3g} {:>11.3g}\n",
                 r.method, r.k_bytes, r.v_bytes, r.compression_ratio, r.key_mse, r.key_cosine,
                 r.value_mse, r.attn_rel_err, r.encode_tokens_per_s, r.attend_tokens_per_s);
    }
    fmt::print("\nfull specs:\n");
    for (const auto& r : results) fmt::print("  {}\n", r.spec);
  };
}

}  // namespace veloxquant::cli
