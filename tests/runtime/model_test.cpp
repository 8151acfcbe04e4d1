// Model loading: stories260K's hyperparameters and weights, and one clear FormatError for each
// way a file can fail to describe a model the runtime can run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

#include "expect_error.h"
#include "model_files.h"
#include "veloxquant/model.h"
#include "veloxquant/rope.h"

namespace veloxquant {
namespace {

using test::GgufContents;

std::string load_error(const GgufContents& c) {
  return test::error_message<FormatError>([&] { Model::from_gguf(c.build()); });
}

#define EXPECT_LOAD_ERROR(contents, fragment) EXPECT_CONTAINS(load_error(contents), fragment)

GgufContents stories() { return GgufContents(GgufFile::open(test::stories_path())); }

TEST(Model, LoadsStories260K) {
  const Model m = Model::load(test::stories_path());
  const ModelConfig& c = m.config();
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.layers, 5u);
  EXPECT_EQ(c.embedding, 64u);
  EXPECT_EQ(c.feed_forward, 172u);
  EXPECT_EQ(c.heads, 8u);
  EXPECT_EQ(c.kv_heads, 4u);
  EXPECT_EQ(c.head_dim, 8u);
  EXPECT_EQ(c.vocab, 512u);
  EXPECT_EQ(c.context_length, 2048u);
  EXPECT_EQ(c.rope.dims, 8u);
  EXPECT_EQ(c.rope.freq_base, 10000.0f);
  EXPECT_EQ(c.rope.freq_scale, 1.0f);
  EXPECT_EQ(c.rope.layout, RopeLayout::Interleaved);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_FALSE(c.tied_output);  // the file stores output.weight (a copy of the embeddings)
  EXPECT_EQ(m.parameter_count(), 292800u);
  EXPECT_EQ(m.weight_bytes(), 292800u * 4);
  EXPECT_EQ(m.tokenizer().vocab_size(), 512u);
  EXPECT_EQ(supported_architectures(), (std::vector<std::string>{"llama", "mistral3", "qwen2", "qwen3",
                                                                 "phi3", "gemma2", "gemma3", "gemma4"}));
}

TEST(Model, WithoutOutputWeightTheEmbeddingsAreTied) {
  GgufContents c = stories();
  c.erase_tensor("output.weight");
  const Model tied = Model::from_gguf(c.build());
  EXPECT_TRUE(tied.config().tied_output);
  // stories260K's output.weight equals its embeddings, so the logits must not change.
  const Model untied = Model::load(test::stories_path());
  const std::vector<int32_t> tokens{1, 400, 30, 7};
  Session a(tied), b(untied);
  EXPECT_EQ(a.eval(tokens, Logits::All), b.eval(tokens, Logits::All));
}

TEST(Model, RefusesAnUnsupportedArchitectureListingTheSupportedOnes) {
  GgufContents c = stories();
  c.set("general.architecture", GgufValue(std::string("gptj")));
  EXPECT_LOAD_ERROR(c,
                    "architecture 'gptj' is not supported; supported: llama, mistral3, qwen2, qwen3, phi3, "
                    "gemma2, gemma3");
}

TEST(Model, RefusesMixtureOfExpertsModelsAsSuch) {
  GgufContents c = stories();
  c.set("general.architecture", GgufValue(std::string("qwen3moe")));
  EXPECT_LOAD_ERROR(c, "architecture 'qwen3moe' is a mixture-of-experts or hybrid (recurrent) model");
  // A llama file with expert routers (Mixtral's conversion) is refused by its tensors.
  GgufContents mixtral = stories();
  mixtral.tensors.push_back(
      {"blk.0.ffn_gate_inp.weight", GgmlType::F32, {64, 8}, std::vector<uint8_t>(64 * 8 * 4)});
  EXPECT_LOAD_ERROR(mixtral, "tensor 'blk.0.ffn_gate_inp.weight' routes tokens to experts");
}

TEST(Model, NamesAMissingTensor) {
  GgufContents c = stories();
  c.erase_tensor("blk.3.ffn_up.weight");
  EXPECT_LOAD_ERROR(c, "blk.3.ffn_up.weight");
}

TEST(Model, NamesATensorWhoseShapeDisagreesWithTheHyperparameters) {
  GgufContents c = stories();
  c.set("llama.feed_forward_length", GgufValue(uint32_t{100}));
  EXPECT_LOAD_ERROR(c, "tensor 'blk.0.ffn_gate.weight' has shape [64, 172]; expected [64, 100]");
}

TEST(Model, NamesBadHyperparameters) {
  GgufContents c = stories();
  c.erase("llama.embedding_length");
  EXPECT_LOAD_ERROR(c, "metadata key 'llama.embedding_length' is missing");
  c = stories();
  c.set("llama.attention.head_count_kv", GgufValue(uint32_t{3}));
  EXPECT_LOAD_ERROR(c, "is not a multiple of llama.attention.head_count_kv 3");
  c = stories();
  c.set("llama.block_count", GgufValue(std::string("five")));
  EXPECT_LOAD_ERROR(c, "metadata key 'llama.block_count' has type string; expected an integer");
  c = stories();
  c.set("llama.attention.layer_norm_rms_epsilon", GgufValue(-1.0f));
  EXPECT_LOAD_ERROR(c, "layer_norm_rms_epsilon' is -1");
  c = stories();
  c.set("llama.rope.scaling.type", GgufValue(std::string("longrope")));
  EXPECT_LOAD_ERROR(c, "'longrope' is not supported; supported: none, linear, yarn");
}

TEST(Model, ReadsLinearRopeScalingAndFrequencyBase) {
  GgufContents c = stories();
  c.set("llama.rope.scaling.type", GgufValue(std::string("linear")));
  c.set("llama.rope.scaling.factor", GgufValue(4.0f));
  c.set("llama.rope.freq_base", GgufValue(500000.0f));
  const Model m = Model::from_gguf(c.build());
  EXPECT_EQ(m.config().rope.freq_scale, 0.25f);
  EXPECT_EQ(m.config().rope.freq_base, 500000.0f);
}

TEST(Model, ReadsYarnRopeScalingAsLlamaCppComputesIt) {
  // stories260K rotates all 8 dims of its heads. With base 1e6 and 32768 original positions,
  // ggml_rope_yarn_corr_dims gives floor(1.47) = 1 and ceil(2.48) = 3.
  GgufContents c = stories();
  c.set("llama.rope.scaling.type", GgufValue(std::string("yarn")));
  c.set("llama.rope.scaling.factor", GgufValue(4.0f));
  c.set("llama.rope.scaling.original_context_length", GgufValue(uint32_t{32768}));
  c.set("llama.rope.freq_base", GgufValue(1e6f));
  const RopeParams r = Model::from_gguf(c.build()).config().rope;
  EXPECT_EQ(r.freq_scale, 0.25f);
  EXPECT_EQ(r.ext_factor, 1.0f);
  EXPECT_EQ(r.yarn_low, 1.0f);
  EXPECT_EQ(r.yarn_high, 3.0f);
  EXPECT_FLOAT_EQ(r.magnitude, 1.0f + 0.1f * std::log(4.0f));
  // Below the low dim a pair keeps its frequency, from the high dim on it is interpolated, and
  // halfway it takes the mean of the two.
  auto plain = [](size_t i) { return std::pow(1e6, -2.0 * static_cast<double>(i) / 8); };
  EXPECT_DOUBLE_EQ(rope_inverse_frequency(r, 0), plain(0));
  EXPECT_DOUBLE_EQ(rope_inverse_frequency(r, 1), plain(1));
  EXPECT_DOUBLE_EQ(rope_inverse_frequency(r, 2), plain(2) * (0.25 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(rope_inverse_frequency(r, 3), plain(3) * 0.25);
  // The attention factor multiplies, and "none" never scales.
  c.set("llama.rope.scaling.attn_factor", GgufValue(0.5f));
  EXPECT_FLOAT_EQ(Model::from_gguf(c.build()).config().rope.magnitude, 0.5f * (1.0f + 0.1f * std::log(4.0f)));
  c.set("llama.rope.scaling.type", GgufValue(std::string("none")));
  EXPECT_EQ(Model::from_gguf(c.build()).config().rope.freq_scale, 1.0f);
}

TEST(Model, ReadsLlama3FrequencyFactorsAndChecksThem) {
  GgufContents c = stories();
  auto with_factors = [&](std::vector<float> f) {
    GgufContents d = c;
    std::vector<uint8_t> bytes(f.size() * 4);
    std::memcpy(bytes.data(), f.data(), bytes.size());
    d.tensors.push_back({"rope_freqs.weight", GgmlType::F32, {f.size()}, bytes});
    return d;
  };
  const Model m = Model::from_gguf(with_factors({1, 2, 4, 8}).build());
  const RopeParams& r = m.config().rope;
  ASSERT_TRUE(r.freq_factors);
  EXPECT_EQ(*r.freq_factors, (std::vector<float>{1, 2, 4, 8}));
  EXPECT_DOUBLE_EQ(rope_inverse_frequency(r, 3), std::pow(10000.0, -6.0 / 8) / 8);
  // A query rotated with the factors differs from one without, pair by pair as the factors say.
  std::vector<float> x(8, 1.0f), y(8, 1.0f);
  apply_rope(r, x.data(), 1, 8, 5);
  apply_rope(RopeParams{.dims = 8}, y.data(), 1, 8, 5);
  EXPECT_EQ(x[0], y[0]);
  EXPECT_NE(x[6], y[6]);
  EXPECT_LOAD_ERROR(with_factors({1, 2, 4}), "tensor 'rope_freqs.weight' has shape [3]; expected [4]");
  EXPECT_LOAD_ERROR(with_factors({1, 0, 4, 8}), "'rope_freqs.weight' value 1 is 0");
  EXPECT_LOAD_ERROR(with_factors({1, 2, NAN, 8}), "'rope_freqs.weight' value 2 is nan");
}

TEST(Model, RefusesATensorTypeItCannotMultiply) {
  GgufContents c = stories();
  for (auto& t : c.tensors) {
    if (t.name != "blk.0.attn_q.weight") continue;
    t.type = GgmlType::IQ2_XS;  // 4096 elements: 16 super-blocks of 74 bytes
    t.data.resize(16 * 74);
  }
  EXPECT_LOAD_ERROR(c, "blk.0.attn_q.weight");
  EXPECT_LOAD_ERROR(c, "iq2_xs");
}

// stories260K's blk.0.attn_q.weight (64 x 64 f32) as Q4_1 (128 blocks of 20 bytes: fp16 d and m,
// then 16 bytes of codes), every scale valid but one field of block 5: its d a NaN, or its m an
// infinity.
TEST(Model, NamesABlockWhoseScaleIsNotFinite) {
  const uint16_t half_one = 0x3c00, nan = 0x7e00, inf = 0x7c00;
  for (const auto& [field, bad, shown] : {std::tuple{0, nan, "nan"}, {2, inf, "inf"}}) {
    GgufContents c = stories();
    for (auto& t : c.tensors) {
      if (t.name != "blk.0.attn_q.weight") continue;
      t.type = GgmlType::Q4_1;
      t.data.assign(128 * 20, 0);
      for (size_t b = 0; b < 128; ++b) std::memcpy(&t.data[b * 20], &half_one, 2);
      std::memcpy(&t.data[5 * 20 + field], &bad, 2);
    }
    EXPECT_LOAD_ERROR(c, std::string("tensor 'blk.0.attn_q.weight' block 5 has scale ") + shown +
                             "; expected finite block scales");
  }
}

}  // namespace
}  // namespace veloxquant
