#include "fixture_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/rng.h"
#include "fixture_vocab.h"
#include "llama_metadata.h"
#include "veloxquant/tensor.h"

namespace veloxquant::dev {
namespace {

constexpr GgmlType kWeightTypes[] = {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0,
                                     GgmlType::Q4_0};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// Seeded by the tensor's name so that adding or dropping a tensor (output.weight when tied)
// leaves every other tensor's values unchanged.
std::vector<float> gaussian(uint64_t seed, const std::string& name, size_t n, double mean, double sigma) {
  Rng rng(derive_seed(seed, {fnv1a(name)}));
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(mean + sigma * rng.normal());
  return x;
}

class Builder {
 public:
  explicit Builder(const FixtureOptions& o) : o_(o) {}

  // A weight matrix of `out` rows with `in` input features, entries N(0, 1/in): each output
  // starts with about the variance of one input element, so activations stay O(1).
  void matrix(const std::string& name, uint32_t in, uint32_t out) {
    const auto x = gaussian(o_.seed, name, size_t{in} * out, 0.0, 1.0 / std::sqrt(double(in)));
    f_.tensors.push_back({name, o_.type, {in, out}, encode_weights(o_.type, x)});
  }
  // Norm weights around 1 and biases around 0, far enough from both that a norm weight or a bias
  // the runtime ignored shows up in the logits.
  void vec(const std::string& name, uint32_t n, double mean, double sigma) {
    f_.tensors.push_back(
        {name, GgmlType::F32, {n}, encode_weights(GgmlType::F32, gaussian(o_.seed, name, n, mean, sigma))});
  }
  void raw_vec(const std::string& name, const std::vector<float>& x) {
    f_.tensors.push_back({name, GgmlType::F32, {x.size()}, encode_weights(GgmlType::F32, x)});
  }
  void meta(std::string key, GgufValue v) { f_.metadata.emplace_back(std::move(key), std::move(v)); }
  Fixture take() { return std::move(f_); }

 private:
  const FixtureOptions& o_;
  Fixture f_;
};

}  // namespace

GgmlType parse_weight_type(const std::string& name) {
  std::string names;
  for (GgmlType t : kWeightTypes) {
    if (name == ggml_type_name(t)) return t;
    names += (names.empty() ? "" : ", ") + std::string(ggml_type_name(t));
  }
  throw Error(fmt::format("fixture: unknown weight type '{}'; expected one of: {}", name, names));
}

namespace {

// What each architecture's converter writes beyond llama's tensors and keys. The fixtures are
// small, so the windows, caps and temperature floor are small too: a 24-token test sequence
// crosses each of them.
struct ArchLayout {
  std::string_view arch;
  bool bpe_vocab;  // byte-level BPE vocabulary (qwen); SentencePiece otherwise
  bool qkv_bias = false, qk_norm = false, post_norms = false, fused = false, tied_only = false;
  bool endoftext = false;  // the vocabulary holds <|endoftext|>, which llama.cpp's phi3 loader looks up
  uint32_t window = 0, pattern = 0;
  float attn_softcap = 0, final_softcap = 0, rope_base_swa = 0, temperature = 0;
  uint32_t original_context = 0;
  bool gemma4 = false;  // per-layer head sizes, shared-KV layers, per-layer inputs (gemma4_layers)
};

constexpr ArchLayout kLayouts[] = {
    {.arch = "llama", .bpe_vocab = false},
    {.arch = "qwen2", .bpe_vocab = true, .qkv_bias = true},
    {.arch = "qwen3", .bpe_vocab = true, .qk_norm = true},
    {.arch = "phi3", .bpe_vocab = false, .fused = true, .endoftext = true},
    {.arch = "mistral3", .bpe_vocab = false, .temperature = 0.5f, .original_context = 8},
    {.arch = "gemma2",
     .bpe_vocab = false,
     .post_norms = true,
     .tied_only = true,
     .window = 8,
     .pattern = 2,
     .attn_softcap = 4.0f,
     .final_softcap = 3.0f},
    {.arch = "gemma3",
     .bpe_vocab = false,
     .qk_norm = true,
     .post_norms = true,
     .window = 8,
     .pattern = 2,
     .rope_base_swa = 10000.0f},
    {.arch = "gemma4",
     .bpe_vocab = false,
     .qk_norm = true,
     .post_norms = true,
     .window = 8,
     .final_softcap = 30.0f,
     .rope_base_swa = 10000.0f,
     .gemma4 = true},
};

// gemma4's layer plan, as Gemma 4 E2B lays its layers out, cut to the fixture's count: windowed
// layers with heads of head_dim, global ones with heads twice as wide (256 / 512 at E2B's size)
// and no attn_v (values from the key projection); from 5 layers on, the last 2 share the caches
// of the last windowed and global cache layers; per-layer inputs of head_dim each, at least 32
// (a whole Q8_0 / Q4_0 block per row).
struct Gemma4Layers {
  uint32_t shared = 0, full_head_dim = 0, per_layer = 0;
  std::vector<bool> sliding;

  Gemma4Layers(uint32_t layers, uint32_t head_dim)
      : shared(layers >= 5 ? 2 : 0), full_head_dim(2 * head_dim), per_layer(std::max(head_dim, 32u)) {
    const uint32_t cache_layers = layers - shared;
    for (uint32_t l = 0; l < layers; ++l) {
      const bool global = l < cache_layers ? l % 3 == 2 || l + 1 == cache_layers
                                           : (l - cache_layers) % 2 == 1;
      sliding.push_back(!global);
    }
  }
  uint32_t head_dim(uint32_t l, uint32_t swa) const { return sliding[l] ? swa : full_head_dim; }
};

// The keys gemma4's converter writes beyond gemma3's: the windowed layers' head size and RoPE
// dims, the per-layer flags, the shared-KV count and the per-layer input width.
void gemma4_metadata(Builder& b, const Gemma4Layers& g, uint32_t swa) {
  const std::string a = "gemma4.";
  b.meta(a + "attention.key_length_swa", GgufValue(swa));
  b.meta(a + "attention.value_length_swa", GgufValue(swa));
  b.meta(a + "rope.dimension_count_swa", GgufValue(swa));
  GgufValue::Array flags{GgufValueType::Bool, {}};
  for (bool s : g.sliding) flags.items.emplace_back(s);
  b.meta(a + "attention.sliding_window_pattern", GgufValue(std::move(flags)));
  b.meta(a + "attention.shared_kv_layers", GgufValue(g.shared));
  b.meta(a + "embedding_length_per_layer_input", GgufValue(g.per_layer));
}

// gemma4's model-wide tensors: proportional RoPE factors for the global layers (a quarter of the
// pairs rotate, 1e30 leaves the rest alone, as the converter writes them) and the per-layer inputs.
void gemma4_tensors(Builder& b, const Gemma4Layers& g, uint32_t width, uint32_t layers, uint32_t vocab) {
  std::vector<float> factors(g.full_head_dim / 2, 1e30f);
  std::fill_n(factors.begin(), factors.size() / 4, 1.0f);
  b.raw_vec("rope_freqs.weight", factors);
  b.matrix("per_layer_token_embd.weight", g.per_layer * layers, vocab);
  b.matrix("per_layer_model_proj.weight", width, g.per_layer * layers);
  b.vec("per_layer_proj_norm.weight", g.per_layer, 1.0, 0.2);
}

// gemma4's tensors of layer l beyond gemma3's: the per-layer input's gate, projection and norm,
// and the layer's output scale.
void gemma4_layer_tensors(Builder& b, const Gemma4Layers& g, const std::string& p, uint32_t width) {
  b.matrix(p + "inp_gate.weight", width, g.per_layer);
  b.matrix(p + "proj.weight", g.per_layer, width);
  b.vec(p + "post_norm.weight", width, 1.0, 0.2);
  b.vec(p + "layer_output_scale.weight", 1, 0.8, 0.1);
}

const ArchLayout& layout_of(const std::string& arch) {
  std::string names;
  for (const ArchLayout& l : kLayouts) {
    if (l.arch == arch) return l;
    names += (names.empty() ? "" : ", ") + std::string(l.arch);
  }
  throw Error(fmt::format("fixture: unknown arch '{}'; expected one of: {}", arch, names));
}

}  // namespace

Fixture make_fixture(const FixtureOptions& o) {
  const ArchLayout& a = layout_of(o.arch);
  parse_weight_type(ggml_type_name(o.type));  // rejects the types the fixture cannot write
  if (!(o.rope_scale >= 0.0f) || !std::isfinite(o.rope_scale))
    throw Error(fmt::format("fixture: rope scale {} must be a finite number >= 0", o.rope_scale));
  if (o.rope_scaling != "linear" && o.rope_scaling != "yarn")
    throw Error(fmt::format("fixture: rope scaling '{}'; expected linear or yarn", o.rope_scaling));
  const FixtureShape& S = o.shape;
  if (S.width == 0 || S.heads == 0 || S.kv_heads == 0 || S.head_dim == 0 || S.ffn == 0 || S.layers == 0 ||
      S.context == 0 || S.heads % S.kv_heads != 0 || S.head_dim % 2 != 0)
    throw Error(
        fmt::format("fixture: shape width {} heads {} kv_heads {} head_dim {} ffn {} layers {} context {}; "
                    "expected sizes >= 1, heads a multiple of kv_heads and an even head_dim",
                    S.width, S.heads, S.kv_heads, S.head_dim, S.ffn, S.layers, S.context));
  FixtureVocab vocab = a.bpe_vocab ? byte_bpe_vocab() : sentencepiece_vocab();
  if (a.endoftext) {
    vocab.tokens.emplace_back("<|endoftext|>");
    vocab.scores.push_back(0.0f);
    vocab.types.push_back(kControl);
  }
  // A real vocabulary (a vocab-only GGUF such as llama.cpp's ggml-vocab-*.gguf) replaces it whole.
  std::vector<std::pair<std::string, GgufValue>> tokenizer = vocab_metadata(vocab);
  auto n_vocab = static_cast<uint32_t>(vocab.tokens.size());
  if (!o.vocab_file.empty()) {
    const GgufFile f = GgufFile::open(o.vocab_file);
    tokenizer.clear();
    for (const auto& [key, value] : f.metadata())
      if (key.starts_with("tokenizer.")) tokenizer.emplace_back(key, value);
    n_vocab = static_cast<uint32_t>(f.get<GgufValue::Array>("tokenizer.ggml.tokens").items.size());
  }

  Builder b(o);
  LlamaHyperparameters h;
  h.arch = o.arch;
  h.layers = S.layers;
  h.context = S.context;
  h.width = S.width;
  h.ffn = S.ffn;
  h.heads = S.heads;
  h.kv_heads = S.kv_heads;
  const Gemma4Layers g4(S.layers, S.head_dim);
  h.head_dim = a.gemma4 ? g4.full_head_dim : S.head_dim;
  h.rms_eps = a.bpe_vocab ? 1e-6f : 1e-5f;
  h.rope_base = a.bpe_vocab || a.rope_base_swa > 0 ? 1000000.0f : 10000.0f;
  h.rope_scale = o.rope_scale;
  h.rope_scaling = o.rope_scaling;
  h.sliding_window = a.window;
  h.sliding_window_pattern = a.pattern;
  h.attn_softcap = a.attn_softcap;
  h.final_softcap = a.final_softcap;
  h.rope_base_swa = a.rope_base_swa;
  h.temperature_scale = a.temperature;
  h.original_context = a.original_context;
  const std::string name = fmt::format("veloxquant fixture {} {}{}", o.arch, ggml_type_name(o.type),
                                       o.tied ? " tied" : "");
  for (auto& [key, value] : llama_metadata(h, o.type, name)) b.meta(std::move(key), std::move(value));
  if (a.gemma4) gemma4_metadata(b, g4, S.head_dim);
  for (auto& [key, value] : tokenizer) b.meta(std::move(key), std::move(value));

  // Embedding rows get the same 1/sqrt(width) scale, so that a tied output projection gives
  // O(1) logits too.
  b.matrix("token_embd.weight", S.width, n_vocab);
  b.vec("output_norm.weight", S.width, 1.0, 0.2);
  if (!o.tied && !a.tied_only) b.matrix("output.weight", S.width, n_vocab);
  if (a.gemma4) gemma4_tensors(b, g4, S.width, S.layers, n_vocab);
  for (uint32_t l = 0; l < S.layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    const uint32_t hd = a.gemma4 ? g4.head_dim(l, S.head_dim) : S.head_dim;
    const uint32_t q_width = S.heads * hd, kv_width = S.kv_heads * hd;
    const bool own_kv = l + g4.shared < S.layers || !a.gemma4;
    b.vec(p + "attn_norm.weight", S.width, 1.0, 0.2);
    if (a.fused) {
      b.matrix(p + "attn_qkv.weight", S.width, q_width + 2 * kv_width);
    } else {
      b.matrix(p + "attn_q.weight", S.width, q_width);
      if (own_kv) b.matrix(p + "attn_k.weight", S.width, kv_width);
      if (own_kv && !(a.gemma4 && !g4.sliding[l])) b.matrix(p + "attn_v.weight", S.width, kv_width);
    }
    if (a.qkv_bias) {
      b.vec(p + "attn_q.bias", q_width, 0.0, 0.5);
      b.vec(p + "attn_k.bias", kv_width, 0.0, 0.5);
      b.vec(p + "attn_v.bias", kv_width, 0.0, 0.5);
    }
    if (a.qk_norm) {
      // gemma4 does not scale scores, so its query norm weights take 1/sqrt(head_dim) to keep the
      // random model's attention as soft as a trained one's.
      const double q_scale = a.gemma4 ? 1.0 / std::sqrt(double(hd)) : 1.0;
      b.vec(p + "attn_q_norm.weight", hd, q_scale, 0.2 * q_scale);
      if (own_kv) b.vec(p + "attn_k_norm.weight", hd, 1.0, 0.2);
    }
    b.matrix(p + "attn_output.weight", q_width, S.width);
    if (a.post_norms) b.vec(p + "post_attention_norm.weight", S.width, 1.0, 0.2);
    b.vec(p + "ffn_norm.weight", S.width, 1.0, 0.2);
    if (a.fused) {
      b.matrix(p + "ffn_up.weight", S.width, 2 * S.ffn);  // the gate's rows, then up's
    } else {
      b.matrix(p + "ffn_gate.weight", S.width, S.ffn);
      b.matrix(p + "ffn_up.weight", S.width, S.ffn);
    }
    b.matrix(p + "ffn_down.weight", S.ffn, S.width);
    if (a.post_norms) b.vec(p + "post_ffw_norm.weight", S.width, 1.0, 0.2);
    if (a.gemma4) gemma4_layer_tensors(b, g4, p, S.width);
  }
  return b.take();
}

void write_gguf(const Fixture& f, const std::string& path) {
  GgufWriter w;
  for (const auto& [key, value] : f.metadata) w.add_metadata(key, value);
  for (const auto& t : f.tensors) w.add_tensor(t.name, t.type, t.dims, t.data);
  w.write_file(path);
}

}  // namespace veloxquant::dev
