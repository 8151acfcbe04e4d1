#include <memory>
#include <utility>

#include "codecs/kivi/method.h"
#include "codecs/xquant/method.h"
#include "codecs/xquant/xquant_pair_codec.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

std::unique_ptr<PairCodec> sharing(std::unique_ptr<Codec> kivi, const Params& p) {
  auto* grid = dynamic_cast<GridCodec*>(kivi.get());
  if (grid == nullptr) throw Error("xquant: KIVI's codec does not expose its grids");
  std::unique_ptr<GridCodec> grids(grid);
  (void)kivi.release();  // owned by `grids` now
  const auto follower = p.get_choice("follower") == "minmax" ? xquant::FollowerGrid::MinMax
                                                              : xquant::FollowerGrid::LeastSquares;
  return std::make_unique<xquant::XQuantPairCodec>(std::move(grids), follower, p.get_float("eta"));
}

}  // namespace

MethodInfo xquant_method() {
  MethodInfo m;
  m.name = "xquant";
  m.family = "cross_layer";
  m.paper = "Yang et al., XQuant, EMNLP 2025, arXiv 2510.11236";
  m.summary = "adjacent layers share KIVI codes: the leader stores codes and grids, the follower "
              "only its own grids";
  // KIVI's parameters; groups of 128 by default, so that the grids cost 0.25 bits per element
  // and a pair averages 1.25 bits per encoded element at 2 bits.
  m.params = kivi_method().params;
  for (ParamDef& p : m.params)
    if (p.name == "group") p.default_value = 128;
  m.params.push_back(ParamDef::choice("follower", {"minmax", "lsq"}, "minmax",
                                      "a follower's grids: its own min/max (the paper) or the least-squares fit to the shared codes"));
  m.params.push_back(ParamDef::real("eta", 0, 0, 0.49,
                                    "data-free calibration: each min/max grid narrowed by eta steps' share at both ends (0: KIVI's)"));
  m.make = [](const Params& p, const LayerShape& s) { return kivi_method().make(p, s); };
  m.pair_leaders = [](const Params&, int layers) {
    std::vector<int> leaders;
    for (int l = 0; l + 1 < layers; l += 2) leaders.push_back(l);
    return leaders;
  };
  m.make_pair = [](const Params& p, const LayerShape& s) {
    LayerCodecs base = kivi_method().make(p, s);  // validates KIVI's parameters
    PairCodecs c;
    c.key = sharing(std::move(base.key), p);
    c.value = sharing(std::move(base.value), p);
    return c;
  };
  return m;
}

}  // namespace veloxquant
