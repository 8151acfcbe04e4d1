#include "runtime/model/hyperparameters.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <string>

namespace veloxquant::runtime {
namespace {

class Reader {
 public:
  Reader(const GgufFile& f, std::string_view arch) : f_(f), prefix_(std::string(arch) + ".") {}

  // A count in [lo, hi]; `fallback` when absent (required when it is negative).
  uint32_t count(const std::string& key, int64_t lo, int64_t hi, int64_t fallback = -1) const {
    const std::string full = prefix_ + key;
    const GgufValue* v = f_.find(full);
    if (!v) {
      if (fallback < 0) throw FormatError("metadata key '" + full + "' is missing; the model needs it");
      return static_cast<uint32_t>(fallback);
    }
    const std::optional<int64_t> value = v->as_integer();
    if (!value) {
      throw FormatError("metadata key '" + full + "' has type " + gguf_value_type_name(v->type()) +
                        "; expected an integer");
    }
    if (*value < lo || *value > hi) {
      throw FormatError("metadata key '" + full + "' is " + std::to_string(*value) + "; expected " +
                        std::to_string(lo) + ".." + std::to_string(hi));
    }
    return static_cast<uint32_t>(*value);
  }

  // A positive finite number, `fallback` when absent.
  float number(const std::string& key, float fallback) const {
    const std::string full = prefix_ + key;
    const GgufValue* v = f_.find(full);
    if (!v) return fallback;
    double x = 0;
    if (v->type() == GgufValueType::Float32) x = v->as<float>("");
    else if (v->type() == GgufValueType::Float64) x = v->as<double>("");
    else if (const auto i = v->as_integer()) x = static_cast<double>(*i);
    else {
      throw FormatError("metadata key '" + full + "' has type " + gguf_value_type_name(v->type()) +
                        "; expected a number");
    }
    if (!std::isfinite(x) || x <= 0 || x > 1e30) {
      throw FormatError("metadata key '" + full + "' is " + std::to_string(x) +
                        "; expected a positive finite number");
    }
    return static_cast<float>(x);
  }

  const GgufValue* find(const std::string& key) const { return f_.find(prefix_ + key); }
  std::string full(const std::string& key) const { return prefix_ + key; }

 private:
  const GgufFile& f_;
  std::string prefix_;
};

// llama.cpp's RoPE scaling (llama_model::load_hparams and llama_context's constructor): the type
// defaults to linear, whose factor defaults to 1; "none" never scales, even with a factor; YaRN
// mixes interpolated and original frequencies between two correction dims and scales the rotated
// vectors by its attention factor. Computed in float, as there.
void read_rope_scaling(const Reader& r, ModelConfig& c) {
  std::string scaling = "linear";
  if (const GgufValue* t = r.find("rope.scaling.type")) scaling = t->as<std::string>(r.full("rope.scaling.type"));
  float factor = r.number("rope.scaling.factor", 0.0f);
  if (factor == 0.0f) factor = r.number("rope.scale_linear", 0.0f);  // older converters' key
  if (scaling != "none" && scaling != "linear" && scaling != "yarn") {
    throw FormatError(r.full("rope.scaling.type") + " '" + scaling +
                      "' is not supported; supported: none, linear, yarn");
  }
  c.rope.freq_scale = scaling == "none" || factor == 0.0f ? 1.0f : 1.0f / factor;
  const float rope_attn_factor = r.number("rope.scaling.attn_factor", 1.0f);
  if (scaling != "yarn") {
    c.rope.magnitude = rope_attn_factor;  // ggml multiplies cos and sin by it whatever the type
    return;
  }
  constexpr float kBetaFast = 32.0f, kBetaSlow = 1.0f;  // llama.cpp's defaults, which it keeps
  const uint32_t original = r.count("rope.scaling.original_context_length", 1, int64_t{1} << 30, c.context_length);
  auto corr_dim = [&](float rotations) {
    return static_cast<float>(c.rope.dims) *
           std::log(static_cast<float>(original) / (rotations * 2.0f * std::numbers::pi_v<float>)) /
           (2.0f * std::log(c.rope.freq_base));
  };
  c.rope.ext_factor = 1.0f;
  c.rope.yarn_low = std::max(0.0f, std::floor(corr_dim(kBetaFast)));
  c.rope.yarn_high = std::min(static_cast<float>(c.rope.dims) - 1.0f, std::ceil(corr_dim(kBetaSlow)));
  const float scale = 1.0f / c.rope.freq_scale;
  float attn_factor = scale <= 1.0f ? 1.0f : 0.1f * std::log(scale) + 1.0f;
  attn_factor *= 1.0f / (1.0f + 0.1f * std::log(scale));
  attn_factor *= rope_attn_factor;
  c.rope.magnitude = attn_factor * (1.0f + 0.1f * std::log(1.0f / c.rope.freq_scale));
}

}  // namespace

ModelConfig read_hyperparameters(const GgufFile& file, const Architecture& arch) {
  const Reader r(file, arch.name);
  ModelConfig c;
  c.architecture = std::string(arch.name);
  if (const GgufValue* name = file.find("general.name"); name && name->is<std::string>())
    c.name = name->as<std::string>("general.name");
  constexpr int64_t kMaxWidth = 1 << 20;
  c.layers = r.count("block_count", 1, 4096);
  c.embedding = r.count("embedding_length", 1, kMaxWidth);
  c.feed_forward = r.count("feed_forward_length", 1, kMaxWidth);
  c.heads = r.count("attention.head_count", 1, 4096);
  c.kv_heads = r.count("attention.head_count_kv", 1, c.heads, c.heads);
  if (c.heads % c.kv_heads != 0) {
    throw FormatError(r.full("attention.head_count") + " " + std::to_string(c.heads) +
                      " is not a multiple of " + r.full("attention.head_count_kv") + " " +
                      std::to_string(c.kv_heads) + "; grouped-query attention needs it to be");
  }
  if (c.embedding % c.heads != 0 && !r.find("attention.key_length")) {
    throw FormatError(r.full("embedding_length") + " " + std::to_string(c.embedding) +
                      " is not a multiple of the head count " + std::to_string(c.heads) +
                      " and " + r.full("attention.key_length") + " is absent");
  }
  c.head_dim = r.count("attention.key_length", 1, 4096, c.embedding / c.heads);
  const uint32_t value_dim = r.count("attention.value_length", 1, 4096, c.head_dim);
  if (value_dim != c.head_dim) {
    throw FormatError(r.full("attention.value_length") + " " + std::to_string(value_dim) +
                      " differs from the key length " + std::to_string(c.head_dim) +
                      "; the runtime needs equal key and value head sizes");
  }
  c.context_length = r.count("context_length", 1, int64_t{1} << 30, 2048);
  c.rms_eps = r.number("attention.layer_norm_rms_epsilon", 1e-5f);

  c.rope.layout = arch.rope_layout;
  c.rope.dims = r.count("rope.dimension_count", 0, c.head_dim, c.head_dim);
  if (c.rope.dims % 2 != 0) {
    throw FormatError(r.full("rope.dimension_count") + " is " + std::to_string(c.rope.dims) +
                      "; expected an even number");
  }
  c.rope.freq_base = r.number("rope.freq_base", 10000.0f);
  read_rope_scaling(r, c);
  return c;
}

}  // namespace veloxquant::runtime
