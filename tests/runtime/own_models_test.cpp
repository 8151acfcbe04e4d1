// The project's own evaluation models (models/): the runtime reproduces the logits PyTorch
// computed at the end of training, greedy continuations stay what they were when the models were
// committed, and every registered KV-cache method runs on them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "calibrated_specs.h"
#include "dev/npy.h"
#include "sanitizer.h"
#include "veloxquant/gguf.h"
#include "veloxquant/method.h"
#include "veloxquant/model.h"
#include "veloxquant/tokenizer.h"

namespace veloxquant {
namespace {

std::string model_path(const std::string& name) {
  return std::string(VELOXQUANT_MODELS_DIR) + "/" + name + ".gguf";
}
std::string data_path(const std::string& file) {
  return std::string(VELOXQUANT_TEST_DATA_DIR) + "/models/" + file;
}

// BOS and the first 31 tokens of the validation text, the sequence train_llama.py stored the
// PyTorch logits for.
const std::vector<int32_t> kReferenceTokens = {
    0,   78,  41,  2035, 2864, 73, 2789, 46, 301, 78,   440,  1678, 85,   988,  81,   85,
    81,  46,  413, 4028, 2772, 46, 3741, 488, 91, 69,   75,   70,   3570, 1044, 2038, 1044};

struct LogitBound {
  std::string model;
  double max_relative_error;  // ||runtime - torch|| / ||torch|| over all positions
  size_t min_argmax_agreement;  // of the 32 positions
};

class OwnModelLogits : public ::testing::TestWithParam<LogitBound> {};

// vq-hd64 and vq-hd128 are stored Q8_0, and products with Q8_0 weights round their inputs to int8
// (as llama.cpp does): together 1.3e-2 and the top token changed at 2 of the 32 positions, on each
// model (on vq-hd128 the weights' rounding alone, with f32 inputs, was 8.9e-3 and 1 position;
// vq-hd64 stored F16 was within 1e-3 and agreed at all 32). vq-gqa is stored Q4_K_M (4.98 bits per
// weight): 1.02e-1 and all 32 positions; its F16 export was within 1.9e-4.
INSTANTIATE_TEST_SUITE_P(Models, OwnModelLogits,
                         ::testing::Values(LogitBound{"vq-hd64", 2e-2, 30}, LogitBound{"vq-hd128", 2e-2, 30},
                                           LogitBound{"vq-gqa", 1.5e-1, 30}),
                         [](const auto& instance) {
                           std::string n = instance.param.model;
                           std::erase(n, '-');
                           return n;
                         });

TEST_P(OwnModelLogits, MatchPyTorch) {
  const LogitBound& b = GetParam();
  const dev::NpyArray ref = dev::read_npy(data_path(b.model + ".ref_logits.npy"));
  Session s(Model::load(model_path(b.model)));
  const std::vector<float> got = s.eval(kReferenceTokens, Logits::All);
  ASSERT_EQ(ref.shape, (std::vector<size_t>{kReferenceTokens.size(), s.model().config().vocab}));
  ASSERT_EQ(got.size(), ref.data.size());
  double diff = 0, norm = 0;
  size_t agree = 0;
  const size_t vocab = ref.shape[1];
  for (size_t p = 0; p < ref.shape[0]; ++p) {
    const float* r = &ref.data[p * vocab];
    const float* g = &got[p * vocab];
    for (size_t i = 0; i < vocab; ++i) {
      diff += (g[i] - r[i]) * double(g[i] - r[i]);
      norm += r[i] * double(r[i]);
    }
    agree += std::max_element(r, r + vocab) - r == std::max_element(g, g + vocab) - g;
  }
  std::printf("%s: relative error %.2e, argmax agreement %zu of %zu\n", b.model.c_str(),
              std::sqrt(diff / norm), agree, ref.shape[0]);
  EXPECT_LE(std::sqrt(diff / norm), b.max_relative_error);
  EXPECT_GE(agree, b.min_argmax_agreement);
}

std::vector<int32_t> greedy(Session& s, const Tokenizer& tok, const std::string& prompt, size_t n) {
  std::vector<int32_t> out;
  std::vector<float> logits = s.eval(tok.encode(prompt, true));
  for (size_t i = 0; i < n; ++i) {
    const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    logits = s.eval(std::vector<int32_t>{next});
  }
  return out;
}

// tests/data/models/greedy.json holds, per model and prompt, the ids and text of a 40-token
// greedy continuation with the fp16 cache. Set VELOXQUANT_UPDATE_GOLDEN=1 to rewrite it after a
// deliberate change to the models or the runtime's arithmetic.
TEST(OwnModels, GreedyContinuationsAreUnchanged) {
  const std::vector<std::string> prompts = {"Once upon a time", "The old man looked at the sea and",
                                            "\"I do not know,\" said she, \""};
  nlohmann::json got;
  for (const std::string name : {"vq-hd128", "vq-hd64", "vq-gqa"}) {
    const Model model = Model::load(model_path(name));
    for (const std::string& prompt : prompts) {
      Session s(model);
      const std::vector<int32_t> ids = greedy(s, model.tokenizer(), prompt, 40);
      got[name].push_back({{"prompt", prompt}, {"ids", ids}, {"text", model.tokenizer().decode(ids)}});
    }
  }
  if (std::getenv("VELOXQUANT_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(data_path("greedy.json")) << got.dump(1) << "\n";
    GTEST_SKIP() << "rewrote " << data_path("greedy.json");
  }
  std::ifstream f(data_path("greedy.json"));
  ASSERT_TRUE(f) << "missing " << data_path("greedy.json");
  const nlohmann::json want = nlohmann::json::parse(f);
  for (const auto& [name, runs] : want.items()) {
    for (size_t i = 0; i < runs.size(); ++i) {
      EXPECT_EQ(got[name][i]["text"], runs[i]["text"]) << name << ", prompt " << runs[i]["prompt"];
      EXPECT_EQ(got[name][i]["ids"], runs[i]["ids"]) << name << ", prompt " << runs[i]["prompt"];
    }
  }
}

std::string wikitext_excerpt(size_t bytes) {
  std::ifstream f(std::string(VELOXQUANT_SHARED_DIR) + "/corpus/wikitext-2-raw/wiki.test.raw");
  std::string text(bytes, '\0');
  f.read(text.data(), static_cast<std::streamsize>(bytes));
  text.resize(static_cast<size_t>(f.gcount()));
  return text;
}

// Mean next-token negative log-likelihood of `tokens` under a session with `spec`.
double mean_nll(const Model& model, const std::string& spec, const std::vector<int32_t>& tokens) {
  Session s(model, {spec, 0});
  const std::vector<float> logits = s.eval(tokens, Logits::All);
  const size_t vocab = model.config().vocab;
  double total = 0;
  for (size_t p = 0; p + 1 < tokens.size(); ++p) {
    const float* l = &logits[p * vocab];
    const float top = *std::max_element(l, l + vocab);
    double sum = 0;
    for (size_t i = 0; i < vocab; ++i) sum += std::exp(double(l[i]) - top);
    total += top + std::log(sum) - l[tokens[p + 1]];
  }
  return total / double(tokens.size() - 1);
}

// Under a sanitizer (test::kUnderSanitizer) the text is shorter and calibrated methods fit on 256
// tokens: that pass looks for memory errors on each method's runtime path, which 320 tokens
// reach (past every default residual window, so blocks are encoded and attended), and the plain
// build checks the bounds.
constexpr std::ptrdiff_t kEvaluatedTokens = test::kUnderSanitizer ? 320 : 1024;
constexpr std::ptrdiff_t kCalibrationTokens = test::kUnderSanitizer ? 256 : 1 << 20;
constexpr bool kChecksBounds = !test::kUnderSanitizer;

// Every method with its default parameters runs inside the runtime on both models, compresses,
// and keeps the text's likelihood close to the fp16 cache's (the bound leaves room for the
// 2-bit defaults; the evaluation command measures each method properly).
TEST(OwnModels, EveryMethodRunsAndStaysCloseToTheFp16Cache) {
  for (const std::string name : {"vq-hd128", "vq-hd64"}) {
    const Model model = Model::load(model_path(name));
    const std::vector<int32_t> text = model.tokenizer().encode(wikitext_excerpt(12000), true);
    const std::vector<int32_t> tokens(text.begin(), text.begin() + std::min(std::ssize(text), kEvaluatedTokens));
    // A calibrated method is fitted to the text after the evaluated tokens, not to them.
    std::vector<int32_t> calibration{text.front()};
    const std::ptrdiff_t after = std::ssize(text) - std::ssize(tokens);
    calibration.insert(calibration.end(), text.begin() + std::ssize(tokens),
                       text.begin() + std::ssize(tokens) + std::min(after, kCalibrationTokens));
    const double fp16 = mean_nll(model, "fp16", tokens);
    for (const MethodInfo& m : registered_methods()) {
      const double nll = mean_nll(model, test::runnable_spec(model, m.name, calibration), tokens);
      SCOPED_TRACE(name + " " + m.name);
      ASSERT_TRUE(std::isfinite(nll));
      // vecinfer's default keeps 1 bit per key element and no per-token scale: +20 % here,
      // +166 % perplexity on WikiText-2 (docs/methods/vecinfer.md, where dims=4, 2 bits, is +23 %).
      // qjl's default (a 1-bit sketch of each key) is +12.3 % on vq-hd128, whose Q8_0 products
      // round their inputs to int8 (+11.2 % when they took f32 inputs).
      const double bound = m.name == "vecinfer" ? 1.25 : m.name == "qjl" ? 1.15 : 1.12;
      if (kChecksBounds) {
        EXPECT_LT(nll, fp16 * bound) << "fp16 " << fp16;
      }
      std::printf("%s %-16s mean NLL %.4f (fp16 %.4f, %+.2f %%)\n", name.c_str(), m.name.c_str(),
                  nll, fp16, 100 * (nll / fp16 - 1));
    }
  }
}

}  // namespace
}  // namespace veloxquant
