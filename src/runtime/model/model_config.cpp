// ModelConfig's per-layer accessors and the cache shapes a model's layers need.
#include "veloxquant/model.h"

namespace veloxquant {
namespace {

uint32_t of(const std::vector<uint32_t>& per_layer, size_t layer, uint32_t uniform) {
  return layer < per_layer.size() ? per_layer[layer] : uniform;
}

}  // namespace

uint32_t ModelConfig::kv_heads_of(size_t layer) const { return of(layer_kv_heads, layer, kv_heads); }
uint32_t ModelConfig::head_dim_of(size_t layer) const { return of(layer_head_dim, layer, head_dim); }
uint32_t ModelConfig::feed_forward_of(size_t layer) const {
  return of(layer_feed_forward, layer, feed_forward);
}

bool ModelConfig::uniform_layers() const {
  for (uint32_t l = 0; l < layers; ++l) {
    if (kv_heads_of(l) != kv_heads || head_dim_of(l) != head_dim || feed_forward_of(l) != feed_forward)
      return false;
  }
  return shared_kv_layers == 0;
}

size_t ModelConfig::kv_layer(size_t layer) const {
  const size_t first_shared = cache_layers();
  if (layer < first_shared) return layer;
  // llama.cpp's gemma3n/gemma4 reuse: the last cache layer is global, the one before it windowed.
  return first_shared - (sliding(layer) ? 2 : 1);
}

std::vector<LayerShape> cache_shapes(const ModelConfig& c) {
  std::vector<LayerShape> shapes;
  for (uint32_t l = 0; l < c.cache_layers(); ++l) {
    LayerShape& s = shapes.emplace_back(
        LayerShape{c.kv_heads_of(l), c.head_dim_of(l), static_cast<int>(l), 0});
    s.rope = c.layer_rope(l);
    s.window = c.sliding(l) ? c.sliding_window : 0;
    s.softcap = c.attention_softcap;
  }
  return shapes;
}

}  // namespace veloxquant
