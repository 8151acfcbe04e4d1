#include "cache/cross_layer.h"

#include <fmt/format.h>

#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace veloxquant {

CrossLayerCoordinator::CrossLayerCoordinator(const Spec& spec, const LayerShape& shape, int layers)
    : pair_index_(static_cast<size_t>(layers), -1), caches_(static_cast<size_t>(layers), nullptr) {
  for (const int leader : spec.method->pair_leaders(spec.params, layers)) {
    if (leader < 0 || leader + 1 >= layers) {
      throw SpecError(fmt::format("{}: a pair led by layer {} does not fit a model of {} layers; "
                                  "expected leaders 0..{}", spec.to_string(), leader, layers, layers - 2));
    }
    for (const int l : {leader, leader + 1}) {
      if (pair_index_[static_cast<size_t>(l)] >= 0) {
        throw SpecError(fmt::format("{}: layer {} is in two pairs; expected each layer in at most one",
                                    spec.to_string(), l));
      }
      pair_index_[static_cast<size_t>(l)] = static_cast<int>(pairs_.size());
    }
    LayerShape at = shape;
    at.layer = leader;
    at.layers = layers;
    pairs_.push_back(Pair{leader, spec.method->make_pair(spec.params, at)});
  }
}

const CrossLayerCoordinator::Pair* CrossLayerCoordinator::pair_of(int layer) const {
  if (layer < 0 || layer >= layers() || pair_index_[static_cast<size_t>(layer)] < 0) return nullptr;
  return &pairs_[static_cast<size_t>(pair_index_[static_cast<size_t>(layer)])];
}

void CrossLayerCoordinator::attach(int layer, KVCache::Impl* cache) {
  if (layer < 0 || layer >= layers()) {
    throw Error(fmt::format("a cross-layer cache for layer {}; expected a layer 0..{}", layer, layers() - 1));
  }
  if (caches_[static_cast<size_t>(layer)] != nullptr) {
    throw Error(fmt::format("layer {} already has a cache in this model's cross-layer coordinator", layer));
  }
  caches_[static_cast<size_t>(layer)] = cache;
}

void CrossLayerCoordinator::detach(int layer, const KVCache::Impl* cache) {
  if (layer >= 0 && layer < layers() && caches_[static_cast<size_t>(layer)] == cache) {
    caches_[static_cast<size_t>(layer)] = nullptr;
  }
}

KVCache::Impl* CrossLayerCoordinator::cache(int layer) const {
  return layer >= 0 && layer < layers() ? caches_[static_cast<size_t>(layer)] : nullptr;
}

std::vector<float> decode_pair_layer(const PairCodec& codec, bool follower,
                                     const uint8_t* leader_codes, const uint8_t* follower_codes,
                                     size_t n) {
  std::vector<uint8_t> scratch;
  const uint8_t* view = codec.view(follower, leader_codes, follower_codes, n, scratch);
  std::vector<float> x(n * codec.dim());
  if (n) codec.view_codec().decode(view, n, x.data());
  return x;
}

}  // namespace veloxquant
