#include "runtime/model/hyperparameters.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <string>

namespace veloxquant::runtime {

uint32_t MetadataReader::count(const std::string& key, int64_t lo, int64_t hi, int64_t fallback) const {
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

std::vector<uint32_t> MetadataReader::per_layer(const std::string& key, uint32_t layers, int64_t lo,
                                                int64_t hi, int64_t fallback) const {
  const GgufValue* v = find(key);
  if (!v || !v->is<GgufValue::Array>()) return std::vector<uint32_t>(layers, count(key, lo, hi, fallback));
  const auto& items = v->as<GgufValue::Array>(full(key)).items;
  if (items.size() != layers) {
    throw FormatError("metadata key '" + full(key) + "' has " + std::to_string(items.size()) +
                      " values; expected one per layer (" + std::to_string(layers) + ")");
  }
  std::vector<uint32_t> counts;
  for (size_t l = 0; l < items.size(); ++l) {
    const std::optional<int64_t> value = items[l].as_integer();
    if (!value || *value < lo || *value > hi) {
      throw FormatError("metadata key '" + full(key) + "' value " + std::to_string(l) + " is " +
                        (value ? std::to_string(*value) : "not an integer") + "; expected " +
                        std::to_string(lo) + ".." + std::to_string(hi));
    }
    counts.push_back(static_cast<uint32_t>(*value));
  }
  return counts;
}

float MetadataReader::number(const std::string& key, float fallback) const {
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

namespace {

// Per-layer arrays whose layers all agree keep only the uniform field, as other models have.
std::vector<uint32_t> unless_uniform(std::vector<uint32_t> per_layer) {
  if (std::all_of(per_layer.begin(), per_layer.end(), [&](uint32_t x) { return x == per_layer.front(); }))
    return {};
  return per_layer;
}

// feed_forward_length and head_count_kv, one for every layer or one per layer (llama.cpp's
// get_key_or_arr); grouped-query attention needs each layer's query heads a multiple of its KV heads.
void read_layer_widths(const MetadataReader& r, ModelConfig& c) {
  constexpr int64_t kMaxWidth = 1 << 20;
  const std::vector<uint32_t> ff = r.per_layer("feed_forward_length", c.layers, 1, kMaxWidth);
  const std::vector<uint32_t> kv = r.per_layer("attention.head_count_kv", c.layers, 1, c.heads, c.heads);
  for (size_t l = 0; l < kv.size(); ++l) {
    if (c.heads % kv[l] != 0) {
      throw FormatError(r.full("attention.head_count") + " " + std::to_string(c.heads) +
                        " is not a multiple of " + r.full("attention.head_count_kv") + " " +
                        std::to_string(kv[l]) + " (layer " + std::to_string(l) +
                        "); grouped-query attention needs it to be");
    }
  }
  c.feed_forward = ff.front();
  c.kv_heads = kv.front();
  c.layer_feed_forward = unless_uniform(ff);
  c.layer_kv_heads = unless_uniform(kv);
}

// llama.cpp's RoPE scaling (llama_model::load_hparams and llama_context's constructor): the type
// defaults to linear, whose factor defaults to 1; "none" never scales, even with a factor; YaRN
// mixes interpolated and original frequencies between two correction dims and scales the rotated
// vectors by its attention factor. Computed in float, as there. The YaRN betas and log multiplier
// are read only where llama.cpp reads them (Architecture::yarn_keys).
void read_rope_scaling(const MetadataReader& r, const Architecture& arch, ModelConfig& c) {
  std::string scaling = "linear";
  if (const GgufValue* t = r.find("rope.scaling.type"))
    scaling = t->as<std::string>(r.full("rope.scaling.type"));
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
  const float beta_fast = arch.yarn_keys ? r.number("rope.scaling.yarn_beta_fast", 32.0f) : 32.0f;
  const float beta_slow = arch.yarn_keys ? r.number("rope.scaling.yarn_beta_slow", 1.0f) : 1.0f;
  const float log_mul = arch.yarn_keys ? r.number("rope.scaling.yarn_log_multiplier", 0.0f) : 0.0f;
  const uint32_t original = r.count("rope.scaling.original_context_length", 1, int64_t{1} << 30,
                                    c.context_length);
  auto corr_dim = [&](float rotations) {
    return static_cast<float>(c.rope.dims) *
           std::log(static_cast<float>(original) / (rotations * 2.0f * std::numbers::pi_v<float>)) /
           (2.0f * std::log(c.rope.freq_base));
  };
  c.rope.ext_factor = 1.0f;
  c.rope.yarn_low = std::max(0.0f, std::floor(corr_dim(beta_fast)));
  c.rope.yarn_high = std::min(static_cast<float>(c.rope.dims) - 1.0f, std::ceil(corr_dim(beta_slow)));
  const float scale = 1.0f / c.rope.freq_scale;
  auto mscale = [&](float m) { return scale <= 1.0f ? 1.0f : 0.1f * m * std::log(scale) + 1.0f; };
  float attn_factor = log_mul != 0.0f ? mscale(1.0f) / mscale(log_mul) : mscale(1.0f);
  attn_factor *= 1.0f / (1.0f + 0.1f * std::log(scale));
  attn_factor *= rope_attn_factor;
  c.rope.magnitude = attn_factor * (1.0f + 0.1f * std::log(1.0f / c.rope.freq_scale));
}

}  // namespace

ModelConfig read_hyperparameters(const GgufFile& file, const Architecture& arch) {
  const MetadataReader r(file, arch.name);
  ModelConfig c;
  c.architecture = std::string(arch.name);
  if (const GgufValue* name = file.find("general.name"); name && name->is<std::string>())
    c.name = name->as<std::string>("general.name");
  constexpr int64_t kMaxWidth = 1 << 20;
  c.layers = r.count("block_count", 1, 4096);
  c.embedding = r.count("embedding_length", 1, kMaxWidth);
  c.heads = r.count("attention.head_count", 1, 4096);
  read_layer_widths(r, c);
  if (c.embedding % c.heads != 0 && !r.find("attention.key_length")) {
    throw FormatError(r.full("embedding_length") + " " + std::to_string(c.embedding) +
                      " is not a multiple of the head count " + std::to_string(c.heads) + " and " +
                      r.full("attention.key_length") + " is absent");
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
  read_rope_scaling(r, arch, c);
  c.activation = arch.activation;
  c.qk_norm = arch.qk_norm;
  c.post_norms = arch.post_norms;
  if (arch.scale_embeddings) c.embedding_scale = std::sqrt(static_cast<float>(c.embedding));
  if (arch.read_extra) arch.read_extra(r, c);
  return c;
}

}  // namespace veloxquant::runtime

namespace veloxquant::runtime {

void read_sliding_window(const MetadataReader& r, ModelConfig& c, uint32_t window, uint32_t pattern,
                         bool same_rope) {
  c.sliding_window = r.count("attention.sliding_window", 0, int64_t{1} << 30, window);
  if (c.sliding_window == 0) return;
  if (c.sliding_window == 1) {
    throw FormatError(r.full("attention.sliding_window") + " is 1 (each token attends to itself alone); "
                                                           "expected 0 (no window) or at least 2");
  }
  c.sliding_layers.assign(c.layers, false);
  const GgufValue* p = r.find("attention.sliding_window_pattern");
  if (p && p->is<GgufValue::Array>()) {
    const auto& items = p->as<GgufValue::Array>("").items;
    if (items.size() != c.layers) {
      throw FormatError(r.full("attention.sliding_window_pattern") + " has " + std::to_string(items.size()) +
                        " flags; expected one per layer (" + std::to_string(c.layers) + ")");
    }
    for (size_t l = 0; l < items.size(); ++l)
      c.sliding_layers[l] = items[l].as<bool>(r.full("attention.sliding_window_pattern"));
  } else {
    // Period n: layers l with l % n < n - 1 are windowed, the last of every n is global; 0
    // windows every layer (llama.cpp's set_swa_pattern).
    const uint32_t n = r.count("attention.sliding_window_pattern", 0, 1 << 20, pattern);
    for (uint32_t l = 0; l < c.layers; ++l) c.sliding_layers[l] = n == 0 || l % n < n - 1;
  }
  c.sliding_rope = c.rope;
  if (!same_rope) {
    // The windowed layers rotate unscaled; YaRN's attention factor would then differ per layer.
    if (c.rope.ext_factor != 0.0f) {
      throw FormatError(r.full("rope.scaling.type") + " 'yarn' with sliding-window layers is not supported; "
                                                      "expected none or linear");
    }
    c.sliding_rope.freq_base = r.number("rope.freq_base_swa", 10000.0f);
    c.sliding_rope.freq_scale = 1.0f;
    c.sliding_rope.ext_factor = 0.0f;
    c.sliding_rope.freq_factors = nullptr;
  }
}

}  // namespace veloxquant::runtime
