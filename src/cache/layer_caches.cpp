// make_layer_caches(): a model's caches, one per layer, with the pairs of a cross-layer method.
#include <fmt/format.h>

#include <memory>

#include "cache/cross_layer.h"
#include "cache/kv_cache_impl.h"
#include "veloxquant/error.h"

namespace veloxquant {

std::vector<KVCache> make_layer_caches(const Spec& spec, const LayerShape& shape, int layers) {
  if (layers < 1)
    throw SpecError(fmt::format("make_layer_caches got {} layers; expected at least 1", layers));
  return make_layer_caches(spec, std::vector<LayerShape>(static_cast<size_t>(layers), shape));
}

std::vector<KVCache> make_layer_caches(const Spec& spec, std::vector<LayerShape> shapes) {
  if (shapes.empty()) throw SpecError("make_layer_caches got no layer shapes; expected at least 1");
  if (spec.method == nullptr) throw SpecError("make_layer_caches needs a parsed spec");
  const int layers = static_cast<int>(shapes.size());
  std::shared_ptr<CrossLayerCoordinator> cross;
  if (spec.method->cross_layer())
    cross = std::make_shared<CrossLayerCoordinator>(spec, shapes.front(), layers);
  std::vector<KVCache> caches;
  caches.reserve(shapes.size());
  for (int l = 0; l < layers; ++l) {
    LayerShape& at = shapes[static_cast<size_t>(l)];
    // A cross-layer method pairs layers of one shape; others take each layer's own.
    if (cross && (at.kv_heads != shapes.front().kv_heads || at.head_dim != shapes.front().head_dim)) {
      throw SpecError(fmt::format("make_layer_caches: '{}' pairs layers, and layer {} has {} KV heads of {}; "
                                  "expected layer 0's {} of {}",
                                  spec.to_string(), l, at.kv_heads, at.head_dim, shapes.front().kv_heads,
                                  shapes.front().head_dim));
    }
    at.layer = l;
    at.layers = layers;
    caches.push_back(KVCache(spec, at, cross));
  }
  return caches;
}

}  // namespace veloxquant
