// Model loading: stories260K's hyperparameters and weights, and one clear FormatError for each
// way a file can fail to describe a model the runtime can run.
#include <gtest/gtest.h>

#include <string>

#include "expect_error.h"
#include "model_files.h"
#include "veloxquant/model.h"

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
  EXPECT_EQ(supported_architectures(), (std::vector<std::string>{"llama", "qwen2"}));
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
  EXPECT_LOAD_ERROR(c, "architecture 'gptj' is not supported; supported: llama, qwen2");
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
  c.set("llama.rope.scaling.type", GgufValue(std::string("yarn")));
  EXPECT_LOAD_ERROR(c, "'yarn' is not supported; supported: none, linear");
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

TEST(Model, RefusesATensorTypeItCannotMultiply) {
  GgufContents c = stories();
  for (auto& t : c.tensors) {
    if (t.name != "blk.0.attn_q.weight") continue;
    t.type = GgmlType::Q5_0;  // 4096 elements: 128 blocks of 22 bytes
    t.data.resize(128 * 22);
  }
  EXPECT_LOAD_ERROR(c, "blk.0.attn_q.weight");
  EXPECT_LOAD_ERROR(c, "q5_0");
}

}  // namespace
}  // namespace veloxquant
