// The coordinator the caches of one model's layers share when their spec is cross-layer
// (minicache, xquant): which layers are stored in pairs, the codecs of each pair, and where each
// layer's cache lives, so that a pair encodes its blocks from both layers' tokens and a follower
// reads what its leader stores. make_layer_caches() creates it with the caches; each cache
// registers itself on construction and leaves on destruction (a KVCache's state stays at one
// address when the KVCache is moved).
#pragma once

#include <string>
#include <vector>

#include "veloxquant/cache.h"
#include "veloxquant/pair_codec.h"

namespace veloxquant {

class CrossLayerCoordinator {
 public:
  // REQUIRES: spec.method->cross_layer(). Throws SpecError when the method's pairs do not fit
  // `layers` (a pair past the last layer, or two pairs sharing a layer).
  CrossLayerCoordinator(const Spec& spec, const LayerShape& shape, int layers);

  struct Pair {
    int leader;  // the follower is leader + 1
    PairCodecs codecs;
  };
  // The pair layer `layer` belongs to; null when it is outside every pair.
  const Pair* pair_of(int layer) const;
  int layers() const { return static_cast<int>(caches_.size()); }

  void attach(int layer, KVCache::Impl* cache);
  void detach(int layer, const KVCache::Impl* cache);
  // The cache of `layer`; null before it is built or after it is destroyed.
  KVCache::Impl* cache(int layer) const;

 private:
  std::vector<Pair> pairs_;
  std::vector<int> pair_index_;  // per layer: its pair in pairs_, or -1
  std::vector<KVCache::Impl*> caches_;
};

}  // namespace veloxquant
