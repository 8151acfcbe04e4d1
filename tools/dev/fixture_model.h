// Small random-weight Llama-family models written the way llama.cpp's converters write them:
// the same tensor names, ggml dims order, metadata keys and value types. They exercise the
// runtime's loader and forward pass on every weight type without shipping model files.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "veloxquant/gguf.h"

namespace veloxquant::dev {

// Sizes. The defaults are small enough to write and check in milliseconds, with grouped-query
// attention (2 query heads per KV head) and rows of 64 and 96 elements (whole Q8_0 / Q4_0
// blocks); benchmarks ask for larger ones (e.g. Llama-3-8B's attention: 32 / 8 heads of 128).
struct FixtureShape {
  uint32_t width = 64, heads = 4, kv_heads = 2, head_dim = 16, ffn = 96, layers = 2, context = 256;
};

struct FixtureOptions {
  // llama, qwen2, qwen3, phi3, mistral3, gemma2, gemma3 or gemma4, each with its converter's
  // tensors and keys (fixture_model.cpp's layouts; gemma4's global layers have heads of
  // 2 x head_dim, windowed ones of head_dim).
  std::string arch = "llama";
  GgmlType type = GgmlType::F32;  // of every 2-D weight; 1-D norms and biases stay F32
  bool tied = false;              // no output.weight: the output projection reuses token_embd
  uint64_t seed = 0;
  float rope_scale = 0;                 // > 0: rope.scaling.type rope_scaling with this factor
  std::string rope_scaling = "linear";  // or "yarn" (its correction dims and attention factor)
  std::string vocab_file = {};          // a GGUF whose tokenizer.* entries replace the fixture's vocabulary
  FixtureShape shape = {};
};

struct FixtureTensor {
  std::string name;
  GgmlType type;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the input features
  std::vector<uint8_t> data;
};

struct Fixture {
  std::vector<std::pair<std::string, GgufValue>> metadata;
  std::vector<FixtureTensor> tensors;
};

// The same options give the same bytes. The f32 weights behind a tensor depend only on the seed
// and the tensor's name, so fixtures that differ only in `type` hold the same model quantized
// differently. Throws Error on an unknown arch, a type outside F32/F16/BF16/Q8_0/Q4_0, or a
// negative rope_scale, or a shape whose sizes are 0, whose heads are not a multiple of its KV
// heads, or whose head_dim is odd (RoPE rotates pairs).
Fixture make_fixture(const FixtureOptions& options);

void write_gguf(const Fixture& fixture, const std::string& path);

// "f32", "q8_0", ... -> the type; Error listing the accepted names otherwise.
GgmlType parse_weight_type(const std::string& name);

}  // namespace veloxquant::dev
