// eval's decisions on hand-made measurements: the guardrail, the recommendation, the Pareto
// front, the JSON shape, the markdown table, and which specs `--kv all` stands for.
#include "eval/eval_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "eval/eval_inputs.h"
#include "eval/method_eval.h"
#include "expect_error.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace veloxquant {
namespace {

using test::error_message;

MethodEval row(std::string spec, size_t bytes, double perplexity, double delta, double kl, double recall) {
  MethodEval r;
  r.spec = std::move(spec);
  r.key_bytes = bytes / 2;
  r.value_bytes = bytes - bytes / 2;
  r.fp16_bytes = 1000;
  r.perplexity = perplexity;
  r.perplexity_delta_pct = delta;
  r.kl_mean = kl;
  r.retrieval_mean = recall;
  return r;
}

// fp16 first, then methods from large to small; "tiny" breaks the KL limit, "blind" loses the
// needle, "mid" passes.
std::vector<MethodEval> rows() {
  return {row("fp16", 1000, 100.0, 0.0, 0.0, 0.98), row("big", 400, 100.5, 0.5, 0.004, 0.98),
          row("mid", 250, 100.8, 0.8, 0.01, 0.97), row("blind", 200, 100.2, 0.2, 0.003, 0.50),
          row("tiny", 100, 100.9, 0.9, 0.2, 0.98)};
}

TEST(EvalReport, BytesRatioAndBitsPerElement) {
  const MethodEval r = row("x", 250, 1, 0, 0, 0);
  EXPECT_EQ(r.bytes(), 250u);
  EXPECT_DOUBLE_EQ(r.compression_ratio(), 4.0);
  EXPECT_DOUBLE_EQ(r.bits_per_element(), 4.0);  // a quarter of fp16's 16 bits
}

TEST(EvalReport, GuardrailNamesEveryBrokenLimit) {
  const std::vector<MethodEval> r = rows();
  const Guardrail g{1.0, 0.05, 0.02};
  EXPECT_EQ(guardrail_failures(r[2], r[0], g), "");
  EXPECT_CONTAINS(guardrail_failures(r[4], r[0], g), "KL 0.2000 > 0.0500");
  EXPECT_CONTAINS(guardrail_failures(r[3], r[0], g), "retrieval 50.0 %");
  const std::string both = guardrail_failures(row("bad", 10, 110, 10.0, 0.3, 0.98), r[0], g);
  EXPECT_CONTAINS(both, "perplexity +10.00 % > 1.00 %");
  EXPECT_CONTAINS(both, "; KL");
}

TEST(EvalReport, RecommendsTheSmallestCacheWithinTheGuardrail) {
  const std::vector<MethodEval> r = rows();
  EXPECT_EQ(recommend(r, Guardrail{1.0, 0.05, 0.02}), std::optional<size_t>(2));  // "mid"
  // Looser limits admit the smaller ones.
  EXPECT_EQ(recommend(r, Guardrail{1.0, 0.5, 0.02}), std::optional<size_t>(4));   // "tiny"
  EXPECT_EQ(recommend(r, Guardrail{1.0, 0.05, 0.6}), std::optional<size_t>(3));   // "blind"
  // Nothing passes: no recommendation, never the baseline itself.
  EXPECT_EQ(recommend(r, Guardrail{0.1, 0.05, 0.02}), std::nullopt);
  EXPECT_CONTAINS(error_message<Error>([] { recommend({}, Guardrail{}); }), "fp16 baseline");
}

TEST(EvalReport, RecommendationTiesGoToTheLowerPerplexity) {
  std::vector<MethodEval> r = rows();
  r.push_back(row("mid-better", 250, 100.6, 0.6, 0.01, 0.97));
  EXPECT_EQ(recommend(r, Guardrail{1.0, 0.05, 0.02}), std::optional<size_t>(5));
}

TEST(EvalReport, ParetoFrontKeepsOnlyUndominatedRows) {
  // bytes / perplexity: fp16 1000/100.0 (best perplexity), big 400/100.5 (dominated by blind
  // 200/100.2), mid 250/100.8 (dominated by blind), blind 200/100.2, tiny 100/100.9 (smallest).
  EXPECT_EQ(pareto_front(rows()), (std::vector<bool>{true, false, false, true, true}));
  // Equal rows do not dominate each other.
  const std::vector<MethodEval> twins{row("a", 100, 5, 0, 0, 0), row("b", 100, 5, 0, 0, 0)};
  EXPECT_EQ(pareto_front(twins), (std::vector<bool>{true, true}));
}

EvalSetup setup() {
  EvalSetup s;
  s.model = "m.gguf";
  s.text = "t.txt";
  s.context = 128;
  s.chunks = 2;
  s.scored_tokens = 126;
  s.retrieval_lengths = {64, 128};
  s.retrieval_depths = {0.5};
  s.needle_tokens = 8;
  s.trials = 1;
  return s;
}

TEST(EvalReport, JsonHasTheSetupEveryMethodAndTheRecommendation) {
  std::vector<MethodEval> r = rows();
  for (MethodEval& m : r) m.retrieval = {NeedleCell{64, 0.5, 1.0, 7}, NeedleCell{128, 0.5, 0.5, 7}};
  const auto j = nlohmann::json::parse(results_json(setup(), r, Guardrail{1.0, 0.05, 0.02}));
  EXPECT_EQ(j.at("setup").at("context"), 128);
  EXPECT_EQ(j.at("setup").at("retrieval_lengths"), nlohmann::json({64, 128}));
  ASSERT_EQ(j.at("methods").size(), r.size());
  const auto& mid = j.at("methods").at(2);
  for (const char* key : {"spec",
                          "key_bytes",
                          "value_bytes",
                          "kv_bytes",
                          "fp16_bytes",
                          "compression_ratio",
                          "bits_per_element",
                          "perplexity",
                          "perplexity_error",
                          "perplexity_delta_pct",
                          "kl_mean",
                          "kl_error",
                          "top1_agreement",
                          "retrieval_mean",
                          "retrieval",
                          "prefill_tokens_per_s",
                          "decode_tokens_per_s",
                          "kv_peak_held_bytes",
                          "peak_rss_mib",
                          "seconds",
                          "pareto"})
    EXPECT_TRUE(mid.contains(key)) << key;
  EXPECT_EQ(mid.at("kv_bytes"), 250);
  EXPECT_EQ(mid.at("key_bytes").get<size_t>() + mid.at("value_bytes").get<size_t>(), 250u);
  EXPECT_EQ(mid.at("pareto"), false);
  EXPECT_EQ(mid.at("retrieval").at(1).at("length"), 128);
  EXPECT_EQ(j.at("recommendation"), "mid");
  EXPECT_EQ(j.at("guardrail").at("max_kl"), 0.05);
  // Nothing passes: null. No guardrail: neither key.
  const auto none = nlohmann::json::parse(results_json(setup(), r, Guardrail{0.1, 0.05, 0.02}));
  EXPECT_TRUE(none.at("recommendation").is_null());
  const auto plain = nlohmann::json::parse(results_json(setup(), r, std::nullopt));
  EXPECT_FALSE(plain.contains("recommendation"));
  EXPECT_FALSE(plain.contains("guardrail"));
}

TEST(EvalReport, MarkdownHasARowPerMethodAndTheFrontInBold) {
  std::vector<MethodEval> r = rows();
  for (MethodEval& m : r) m.retrieval = {NeedleCell{64, 0.5, 1.0, 7}};
  const std::string md = results_markdown(setup(), r);
  EXPECT_CONTAINS(md, "| **`fp16`** | 500 | 500 | 1.00x | 16.00 |");
  EXPECT_CONTAINS(md, "| `mid` | 125 | 125 | 4.00x | 4.00 | 100.800 | +0.80 % |");
  EXPECT_CONTAINS(md, "| spec | 64 @ 0.50 |");
  EXPECT_CONTAINS(md, "| `blind` | 100.0 % |");
  EXPECT_EQ(md.find("Long-context tasks"), std::string::npos);  // none ran
  EXPECT_EQ(md.find("Every measurement ran on"), std::string::npos);  // the CPU: said by nothing
}

TEST(EvalReport, TheDeviceAndWhatItLeftOutAreInTheSetup) {
  EvalSetup s = setup();
  EXPECT_EQ(nlohmann::json::parse(results_json(s, rows(), std::nullopt)).at("setup").at("device"), "cpu");
  s.device = "cuda (f16 weights)";
  s.skipped = {DeviceSkip{"palu", "'palu': palu runs on the CPU cache only"}};
  const auto j = nlohmann::json::parse(results_json(s, rows(), std::nullopt));
  EXPECT_EQ(j.at("setup").at("device"), "cuda (f16 weights)");
  EXPECT_EQ(j.at("setup").at("not_on_device").at(0).at("spec"), "palu");
  EXPECT_CONTAINS(j.at("setup").at("not_on_device").at(0).at("reason").get<std::string>(), "CPU cache only");
  EXPECT_CONTAINS(results_markdown(s, rows()),
                  "Every measurement ran on cuda (f16 weights); not run there (see results.json): `palu`.");
}

TEST(EvalReport, TaskScoresGoToTheJsonAndATableOfTheirOwn) {
  std::vector<MethodEval> r = rows();
  for (MethodEval& m : r) {
    m.tasks = {LongTaskCell{"niah_multikey", 1024, 2, 0.5}, LongTaskCell{"common_words", 1024, 2, 0.25}};
    m.tasks_mean = 0.375;
  }
  EvalSetup s = setup();
  s.tasks = {"niah_multikey", "common_words"};
  s.task_lengths = {1024};
  s.task_samples = 2;
  const auto j = nlohmann::json::parse(results_json(s, r, std::nullopt));
  EXPECT_EQ(j.at("setup").at("tasks"), nlohmann::json({"niah_multikey", "common_words"}));
  EXPECT_EQ(j.at("setup").at("task_samples"), 2);
  EXPECT_EQ(j.at("methods").at(1).at("tasks_mean"), 0.375);
  EXPECT_EQ(j.at("methods").at(1).at("tasks").at(1).at("task"), "common_words");
  EXPECT_EQ(j.at("methods").at(1).at("tasks").at(1).at("score"), 0.25);
  const std::string md = results_markdown(s, r);
  EXPECT_CONTAINS(md, "Long-context tasks by length (2 samples each");
  EXPECT_CONTAINS(md, "| spec | mean | niah_multikey @ 1024 | common_words @ 1024 |");
  EXPECT_CONTAINS(md, "| `mid` | 37.5 % | 50.0 % | 25.0 % |");
}

TEST(EvalSpecs, AllIsEveryUncalibratedQuantizerThenEveryPolicyWithFp16First) {
  const std::vector<std::string> specs = expand_eval_specs({"all"}, 256);
  const auto calibrated = std::count_if(registered_methods().begin(), registered_methods().end(),
                                        [](const MethodInfo& m) { return m.calibrated(); });
  EXPECT_GE(calibrated, 1);  // kvquant_nuq
  ASSERT_EQ(specs.size(), registered_methods().size() - static_cast<size_t>(calibrated) + registered_policies().size());
  for (const std::string& spec : specs) EXPECT_FALSE(parse_spec(spec).method->calibrated()) << spec;
  EXPECT_EQ(specs.front(), parse_spec("fp16").to_string());
  // Policies alone, at the budget given.
  EXPECT_EQ(specs.back(), parse_spec(registered_policies().back().name + ":budget=256").to_string());
  EXPECT_EQ(specs[1], parse_spec(registered_methods()[1].name).to_string());
}

TEST(EvalSpecs, NamedSpecsAreCanonicalWithoutRepeatsAfterFp16) {
  const std::vector<std::string> specs = expand_eval_specs({"kivi", "kivi:kbits=2", "snapkv:budget=64+kivi"}, 256);
  ASSERT_EQ(specs.size(), 3u);
  EXPECT_EQ(specs[0], "fp16");
  EXPECT_EQ(specs[1], parse_spec("kivi").to_string());
  EXPECT_EQ(specs[2], parse_spec("snapkv:budget=64+kivi").to_string());
  EXPECT_CONTAINS(error_message<SpecError>([] { expand_eval_specs({"kivi:kbits=99"}, 256); }), "kbits=99");
  EXPECT_CONTAINS(error_message<SpecError>([] { expand_eval_specs({"nosuch"}, 256); }), "nosuch");
}

// On the GPU, "all" keeps what the CUDA backend holds on the model's layers and lists the rest
// with cuda::supports()'s reason; a spec named on its own that it does not hold is an error.
TEST(EvalSpecs, OnTheGpuAllKeepsWhatTheBackendHoldsAndNamedSpecsMustRun) {
  if (const std::string missing = test::missing_eval_input(); !missing.empty())
    GTEST_SKIP() << missing << " is missing";
  const Model& model = test::eval_model();
  std::vector<std::string> specs = expand_eval_specs({"all", "kivi:kbits=4,vbits=4"}, 256);
  const size_t before = specs.size();
  const std::vector<DeviceSkip> skipped = drop_specs_off_cuda(specs, {"all", "kivi:kbits=4,vbits=4"}, model);
  EXPECT_EQ(specs.size() + skipped.size(), before);
  EXPECT_EQ(specs.front(), "fp16");
  const LayerShape shape = cache_shapes(model.config()).front();
  for (const std::string& spec : specs) EXPECT_TRUE(cuda::supports(parse_spec(spec), shape)) << spec;
  for (const DeviceSkip& k : skipped) EXPECT_EQ(k.reason, cuda::supports(parse_spec(k.spec), shape).reason);
  for (const char* kept : {"kivi", "turboquant_mse", "turboquant_rvq", "qjl"})
    EXPECT_NE(std::find(specs.begin(), specs.end(), parse_spec(kept).to_string()), specs.end()) << kept;
  for (const char* left : {"palu", "cachegen"})
    EXPECT_TRUE(std::any_of(skipped.begin(), skipped.end(), [&](const DeviceSkip& k) {
      return k.spec == parse_spec(left).to_string();
    })) << left;
  std::vector<std::string> named = expand_eval_specs({"palu"}, 256);
  const std::string refused = error_message<SpecError>([&] { drop_specs_off_cuda(named, {"palu"}, model); });
  EXPECT_CONTAINS(refused, "eval --device cuda: 'palu:");
  EXPECT_CONTAINS(refused, "palu runs on the CPU cache");
  // Observation reads host-side caches: refused before anything runs.
  EvalOptions o;
  o.kv = {"kivi"}, o.context = 64, o.device = Device::Cuda, o.observe = true;
  EXPECT_CONTAINS(error_message<Error>([&] { evaluate_methods_json(model, "text", o, std::nullopt); }),
                  "eval --observe reads the caches on the host; expected --device cpu with it");
}

}  // namespace
}  // namespace veloxquant
