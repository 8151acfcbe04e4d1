#include "fixture_model.h"

#include <fmt/format.h>

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
std::vector<float> gaussian(uint64_t seed, const std::string& name, size_t n, double mean,
                            double sigma) {
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
};

constexpr ArchLayout kLayouts[] = {
    {.arch = "llama", .bpe_vocab = false},
    {.arch = "qwen2", .bpe_vocab = true, .qkv_bias = true},
    {.arch = "qwen3", .bpe_vocab = true, .qk_norm = true},
    {.arch = "phi3", .bpe_vocab = false, .fused = true, .endoftext = true},
    {.arch = "mistral3", .bpe_vocab = false, .temperature = 0.5f, .original_context = 8},
    {.arch = "gemma2", .bpe_vocab = false, .post_norms = true, .tied_only = true, .window = 8, .pattern = 2,
     .attn_softcap = 4.0f, .final_softcap = 3.0f},
    {.arch = "gemma3", .bpe_vocab = false, .qk_norm = true, .post_norms = true, .window = 8, .pattern = 2,
     .rope_base_swa = 10000.0f},
};

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
    throw Error(fmt::format("fixture: shape width {} heads {} kv_heads {} head_dim {} ffn {} layers {} context {}; "
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
  h.head_dim = S.head_dim;
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
  const std::string name = fmt::format("veloxquant fixture {} {}{}", o.arch,
                                       ggml_type_name(o.type), o.tied ? " tied" : "");
  for (auto& [key, value] : llama_metadata(h, o.type, name)) b.meta(std::move(key), std::move(value));
  for (auto& [key, value] : tokenizer) b.meta(std::move(key), std::move(value));

  // Embedding rows get the same 1/sqrt(width) scale, so that a tied output projection gives
  // O(1) logits too.
  b.matrix("token_embd.weight", S.width, n_vocab);
  b.vec("output_norm.weight", S.width, 1.0, 0.2);
  if (!o.tied && !a.tied_only) b.matrix("output.weight", S.width, n_vocab);
  const uint32_t q_width = S.heads * S.head_dim, kv_width = S.kv_heads * S.head_dim;
  for (uint32_t l = 0; l < S.layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    b.vec(p + "attn_norm.weight", S.width, 1.0, 0.2);
    if (a.fused) {
      b.matrix(p + "attn_qkv.weight", S.width, q_width + 2 * kv_width);
    } else {
      b.matrix(p + "attn_q.weight", S.width, q_width);
      b.matrix(p + "attn_k.weight", S.width, kv_width);
      b.matrix(p + "attn_v.weight", S.width, kv_width);
    }
    if (a.qkv_bias) {
      b.vec(p + "attn_q.bias", q_width, 0.0, 0.5);
      b.vec(p + "attn_k.bias", kv_width, 0.0, 0.5);
      b.vec(p + "attn_v.bias", kv_width, 0.0, 0.5);
    }
    if (a.qk_norm) {
      b.vec(p + "attn_q_norm.weight", S.head_dim, 1.0, 0.2);
      b.vec(p + "attn_k_norm.weight", S.head_dim, 1.0, 0.2);
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
