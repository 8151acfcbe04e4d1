#include <cmath>

#include "codecs/kivi/method.h"
#include "codecs/minicache/method.h"
#include "codecs/minicache/minicache_pair_codec.h"

namespace veloxquant {
namespace {

// The first layer merged, from the `start` fraction of the model's depth.
int first_merged_layer(const Params& p, int layers) {
  return static_cast<int>(std::floor(p.get_float("start") * layers + 1e-9));
}

}  // namespace

MethodInfo minicache_method() {
  MethodInfo m;
  m.name = "minicache";
  m.family = "cross_layer";
  m.paper = "Liu et al., MiniCache, NeurIPS 2024, arXiv 2405.14366";
  m.summary = "from mid-depth, adjacent layers share one SLERP-merged direction per token (KIVI "
              "codes) and keep their own magnitudes; the most divergent tokens are retained";
  // KIVI's parameters (the base quantizer of the shared directions and of the unmerged layers)
  // at the 4 bits the paper composes MiniCache with, then the merge's.
  m.params = kivi_method().params;
  for (ParamDef& p : m.params)
    if (p.name == "kbits" || p.name == "vbits") p.default_value = 4;
  m.params.push_back(ParamDef::real("start", 0.5, 0, 1,
                                    "first merged layer, as a fraction of depth (floor(start * layers); 1: none)"));
  m.params.push_back(ParamDef::real("t", 0.6, 0, 1, "SLERP interpolation toward the deeper layer of a pair"));
  m.params.push_back(ParamDef::real("retain", 0.05, 0, 0.5,
                                    "fraction of each group's tokens retained unmerged (ceil(retain * group)), the most divergent"));
  m.make = [](const Params& p, const LayerShape& s) { return kivi_method().make(p, s); };
  m.pair_leaders = [](const Params& p, int layers) {
    std::vector<int> leaders;
    for (int l = first_merged_layer(p, layers); l + 1 < layers; l += 2) leaders.push_back(l);
    return leaders;
  };
  m.make_pair = [](const Params& p, const LayerShape& s) {
    LayerCodecs base = kivi_method().make(p, s);  // validates KIVI's parameters
    const auto group = static_cast<size_t>(p.get_int("group"));
    const auto retained = static_cast<size_t>(std::ceil(p.get_float("retain") * static_cast<double>(group) - 1e-9));
    const double t = p.get_float("t");
    PairCodecs c;
    c.key = std::make_unique<minicache::MiniCachePairCodec>(std::move(base.key), group, retained, t);
    c.value = std::make_unique<minicache::MiniCachePairCodec>(std::move(base.value), group, retained, t);
    return c;
  };
  return m;
}

}  // namespace veloxquant
