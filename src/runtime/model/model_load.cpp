// Model::load: finds the architecture, reads hyperparameters and tokenizer, and checks every
// tensor the graph uses against the shapes those hyperparameters imply before anything runs.
#include <cmath>
#include <memory>
#include <string>

#include "runtime/gguf/block_scales.h"
#include "runtime/model/architecture.h"
#include "runtime/model/hyperparameters.h"
#include "runtime/model/model_impl.h"

namespace veloxquant {
namespace {

std::string dims_string(const std::vector<uint64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

class TensorLoader {
 public:
  TensorLoader(const GgufFile& f, Model::Impl& m) : f_(f), m_(m) {}

  // A matrix of `rows` outputs by `cols` inputs (ggml dims {cols, rows}).
  runtime::WeightMatrix matrix(const std::string& name, size_t rows, size_t cols) {
    const GgufTensorInfo& t = f_.tensor(name);
    expect_dims(t, {cols, rows});
    count(t);
    runtime::WeightMatrix w = runtime::WeightMatrix::from_gguf(f_, t);
    gguf::check_block_scales(t.name, t.type, w.data);
    return w;
  }

  // A 1-D f32 vector of n values (norm weights and biases are kept in f32 by every converter,
  // but any decodable type is accepted).
  std::vector<float> vector(const std::string& name, size_t n) {
    const GgufTensorInfo& t = f_.tensor(name);
    expect_dims(t, {n});
    count(t);
    return f_.tensor_f32(t);
  }

  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

 private:
  void expect_dims(const GgufTensorInfo& t, std::vector<uint64_t> want) {
    if (t.dims != want) {
      throw FormatError("tensor '" + t.name + "' has shape " + dims_string(t.dims) + "; expected " +
                        dims_string(want) + " (ggml order) from the model's hyperparameters");
    }
  }
  void count(const GgufTensorInfo& t) {
    m_.parameters += t.elements;
    m_.weight_bytes += t.bytes;
  }

  const GgufFile& f_;
  Model::Impl& m_;
};

// Positive finite RoPE frequency divisors (rope_freqs, rope_factors_*), dims / 2 of them.
std::shared_ptr<const std::vector<float>> rope_factors(TensorLoader& load, const std::string& name,
                                                       size_t n) {
  std::vector<float> factors = load.vector(name, n);
  for (size_t i = 0; i < factors.size(); ++i) {
    if (!std::isfinite(factors[i]) || factors[i] <= 0.0f) {
      throw FormatError("tensor '" + name + "' value " + std::to_string(i) + " is " +
                        std::to_string(factors[i]) + "; expected a positive finite frequency divisor");
    }
  }
  return std::make_shared<const std::vector<float>>(std::move(factors));
}

// The q, k and v projections, from attn_q/k/v or from one fused attn_qkv (phi3, and any
// architecture whose converter fused them, as llama.cpp's create_tensor_qkv accepts), with their
// biases where the file has them. A shared-KV layer (kv_width 0) has only its queries; a layer
// of an optional_values architecture may lack attn_v.
void load_attention(TensorLoader& load, const std::string& p, const runtime::Architecture& arch, size_t d,
                    size_t q_width, size_t kv_width, LayerWeights& l, bool& qkv_bias) {
  if (kv_width > 0 && load.has(p + "attn_qkv.weight")) {
    const runtime::WeightMatrix qkv = load.matrix(p + "attn_qkv.weight", q_width + 2 * kv_width, d);
    l.wq = qkv.row_view(0, q_width);
    l.wk = qkv.row_view(q_width, kv_width);
    l.wv = qkv.row_view(q_width + kv_width, kv_width);
    if (load.has(p + "attn_qkv.bias")) {
      const std::vector<float> b = load.vector(p + "attn_qkv.bias", q_width + 2 * kv_width);
      l.bq.assign(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(q_width));
      l.bk.assign(b.begin() + static_cast<std::ptrdiff_t>(q_width),
                  b.begin() + static_cast<std::ptrdiff_t>(q_width + kv_width));
      l.bv.assign(b.begin() + static_cast<std::ptrdiff_t>(q_width + kv_width), b.end());
    }
  } else {
    l.wq = load.matrix(p + "attn_q.weight", q_width, d);
    if (kv_width > 0) l.wk = load.matrix(p + "attn_k.weight", kv_width, d);
    if (kv_width > 0 && (!arch.optional_values || load.has(p + "attn_v.weight")))
      l.wv = load.matrix(p + "attn_v.weight", kv_width, d);
  }
  // Biases are required where the architecture has them and honoured wherever they appear.
  if (l.bq.empty() && (arch.requires_qkv_bias || load.has(p + "attn_q.bias"))) {
    l.bq = load.vector(p + "attn_q.bias", q_width);
    l.bk = load.vector(p + "attn_k.bias", kv_width);
    l.bv = load.vector(p + "attn_v.bias", kv_width);
  }
  qkv_bias = qkv_bias || !l.bq.empty();
  l.wo = load.matrix(p + "attn_output.weight", d, q_width);
}

// The feed-forward of `ff` hidden units: ffn_gate and ffn_up, or one fused ffn_up (phi3).
void load_feed_forward(TensorLoader& load, const std::string& p, size_t d, size_t ff, LayerWeights& l) {
  if (load.has(p + "ffn_gate.weight")) {
    l.gate = load.matrix(p + "ffn_gate.weight", ff, d);
    l.up = load.matrix(p + "ffn_up.weight", ff, d);
  } else {
    // Fused (phi3): ffn_up holds the gate's rows, then the up projection's.
    const runtime::WeightMatrix gate_up = load.matrix(p + "ffn_up.weight", 2 * ff, d);
    l.gate = gate_up.row_view(0, ff);
    l.up = gate_up.row_view(ff, ff);
  }
  l.down = load.matrix(p + "ffn_down.weight", d, ff);
}

// gemma4's per-layer token inputs (ModelConfig::per_layer_embedding): the model's tables, then
// each layer's gate, projection and norm.
void load_per_layer_inputs(TensorLoader& load, Model::Impl& m) {
  const ModelConfig& c = m.config;
  const size_t d = c.embedding, pl = c.per_layer_embedding, all = pl * c.layers;
  m.per_layer_token_embd = load.matrix("per_layer_token_embd.weight", c.vocab, all);
  m.per_layer_model_proj = load.matrix("per_layer_model_proj.weight", all, d);
  m.per_layer_proj_norm = load.vector("per_layer_proj_norm.weight", pl);
  for (uint32_t i = 0; i < c.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = m.layers[i];
    l.per_layer_gate = load.matrix(p + "inp_gate.weight", pl, d);
    l.per_layer_proj = load.matrix(p + "proj.weight", d, pl);
    l.per_layer_post_norm = load.vector(p + "post_norm.weight", d);
  }
}

void load_layer(TensorLoader& load, Model::Impl& m, const runtime::Architecture& arch, uint32_t i) {
  const ModelConfig& c = m.config;
  const std::string p = "blk." + std::to_string(i) + ".";
  LayerWeights& l = m.layers[i];
  const size_t d = c.embedding, hd = c.head_dim_of(i), q_width = size_t{c.heads} * hd;
  const bool own_kv = i < c.cache_layers();
  if (load.has(p + "ffn_gate_inp.weight")) {
    throw FormatError(
        "tensor '" + p + "ffn_gate_inp.weight' routes tokens to experts: a mixture-of-experts " +
        c.architecture + " model, which the runtime does not run; expected dense feed-forward layers");
  }
  l.attn_norm = load.vector(p + "attn_norm.weight", d);
  load_attention(load, p, arch, d, q_width, own_kv ? size_t{c.kv_heads_of(i)} * hd : 0, l, m.config.qkv_bias);
  if (c.qk_norm) {
    l.q_norm = load.vector(p + "attn_q_norm.weight", hd);
    if (own_kv) l.k_norm = load.vector(p + "attn_k_norm.weight", hd);
  }
  l.ffn_norm = load.vector(p + "ffn_norm.weight", d);
  load_feed_forward(load, p, d, c.feed_forward_of(i), l);
  if (c.post_norms) {
    l.post_attn_norm = load.vector(p + "post_attention_norm.weight", d);
    l.post_ffn_norm = load.vector(p + "post_ffw_norm.weight", d);
  }
  if (load.has(p + "layer_output_scale.weight"))
    l.output_scale = load.vector(p + "layer_output_scale.weight", 1)[0];
}

void load_weights(Model::Impl& m, const runtime::Architecture& arch) {
  const ModelConfig& c = m.config;
  TensorLoader load(m.file, m);
  const size_t d = c.embedding;
  const GgufTensorInfo& embd = m.file.tensor("token_embd.weight");
  if (embd.dims.size() != 2 || embd.dims[0] != d) {
    throw FormatError("tensor 'token_embd.weight' has shape " + dims_string(embd.dims) + "; expected [" +
                      std::to_string(d) + ", vocab]");
  }
  m.config.vocab = static_cast<uint32_t>(embd.dims[1]);
  m.token_embd = load.matrix("token_embd.weight", c.vocab, d);
  m.output_norm = load.vector("output_norm.weight", d);
  m.config.tied_output = arch.tied_output || !load.has("output.weight");
  m.output = m.config.tied_output ? m.token_embd : load.matrix("output.weight", c.vocab, d);
  // Llama 3.1+ divides each RoPE frequency by a factor its converter stores (rope_freqs.weight);
  // phi3's 128k models store one set for short contexts and one for long. gemma4's global layers
  // alone use theirs (sliding_rope was set apart before), 1e30 leaving a pair unrotated.
  if (load.has("rope_freqs.weight"))
    m.config.rope.freq_factors = rope_factors(load, "rope_freqs.weight", c.rope.dims / 2);
  if (load.has("rope_factors_short.weight")) {
    m.config.rope.freq_factors = rope_factors(load, "rope_factors_short.weight", c.rope.dims / 2);
    m.rope_long_factors = rope_factors(load, "rope_factors_long.weight", c.rope.dims / 2);
    m.rope_original_context = runtime::MetadataReader(m.file, arch.name)
                                  .count("rope.scaling.original_context_length", 1, int64_t{1} << 30,
                                         c.context_length);
  }
  m.layers.resize(c.layers);
  for (uint32_t i = 0; i < c.layers; ++i) load_layer(load, m, arch, i);
  if (c.per_layer_embedding > 0) load_per_layer_inputs(load, m);
}

}  // namespace

Model::Model(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Model Model::load(const std::string& path) {
  GgufFile file = GgufFile::open(path);
  try {
    return from_gguf(std::move(file));
  } catch (const FormatError& e) {
    throw FormatError(path + ": " + e.what());
  }
}

Model Model::from_gguf(GgufFile file) {
  auto m = std::make_shared<Impl>(std::move(file));
  const auto& arch_name = m->file.get<std::string>("general.architecture");
  const runtime::Architecture& arch = runtime::find_architecture(arch_name);
  m->config = runtime::read_hyperparameters(m->file, arch);
  // The tokenizer first: an unsupported one is named before the weights are checked.
  m->tokenizer.emplace(Tokenizer::from_gguf(m->file));
  load_weights(*m, arch);
  if (m->tokenizer->vocab_size() > m->config.vocab) {
    throw FormatError("the tokenizer has " + std::to_string(m->tokenizer->vocab_size()) +
                      " tokens but token_embd.weight only " + std::to_string(m->config.vocab) +
                      " rows; expected at most as many tokens as embedding rows");
  }
  return Model(std::move(m));
}

const ModelConfig& Model::config() const { return impl_->config; }
const Tokenizer& Model::tokenizer() const { return *impl_->tokenizer; }
const GgufFile& Model::file() const { return impl_->file; }
size_t Model::parameter_count() const { return impl_->parameters; }
size_t Model::weight_bytes() const { return impl_->weight_bytes; }

}  // namespace veloxquant
