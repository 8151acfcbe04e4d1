// gemma2 and gemma3: NeoX RoPE, embeddings scaled by sqrt(width), GeGLU, an RMSNorm after
// attention and after the feed-forward (post_attention_norm, post_ffw_norm), always-tied output,
// and sliding-window layers. gemma2 caps attention scores (50) and logits (30) and alternates
// windowed and global layers; gemma3 drops the caps for per-head q/k RMSNorm, makes five of every
// six layers windowed and rotates those with their own base. Their converters fold Gemma's
// (1 + w) norm weights into w, so the norms are plain RMSNorms.
#include <cmath>

#include "runtime/model/architecture.h"
#include "runtime/model/hyperparameters.h"

namespace veloxquant::runtime {
namespace {

// The 27B models scale queries by 1/sqrt(width / heads) rather than 1/sqrt(head_dim)
// (gemma_pytorch's query_pre_attn_scalar); llama.cpp knows them by their layer count.
void read_query_scale(ModelConfig& c, uint32_t layers_of_27b) {
  const uint32_t head_width = c.embedding / c.heads;
  if (c.layers == layers_of_27b) c.attention_scale = 1.0f / std::sqrt(static_cast<float>(head_width));
}

void read_gemma2(const MetadataReader& r, ModelConfig& c) {
  read_sliding_window(r, c, 4096, 2, true);
  c.attention_softcap = r.number("attn_logit_softcapping", 50.0f);
  c.final_softcap = r.number("final_logit_softcapping", 30.0f);
  read_query_scale(c, 46);
}

void read_gemma3(const MetadataReader& r, ModelConfig& c) {
  read_sliding_window(r, c, 0, 6, false);
  c.final_softcap = r.number("final_logit_softcapping", 0.0f);
  read_query_scale(c, 62);
}

}  // namespace

extern const Architecture kGemma2{.name = "gemma2", .rope_layout = RopeLayout::Neox, .post_norms = true,
                                  .activation = Activation::GeluTanh, .scale_embeddings = true,
                                  .tied_output = true, .read_extra = read_gemma2};
extern const Architecture kGemma3{.name = "gemma3", .rope_layout = RopeLayout::Neox, .qk_norm = true,
                                  .post_norms = true, .activation = Activation::GeluTanh,
                                  .scale_embeddings = true, .read_extra = read_gemma3};

}  // namespace veloxquant::runtime
