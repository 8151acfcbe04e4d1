#include <memory>
#include <string>

#include "codecs/zipcache/method.h"
#include "codecs/zipcache/zipcache_codec.h"
#include "veloxquant/error.h"

namespace veloxquant {
MethodInfo zipcache_method() {
  MethodInfo m;
  m.name = "zipcache";
  m.family = "zipcache";
  m.paper = "He et al., ZipCache, NeurIPS 2024, arXiv 2405.14256";
  m.summary = "per-token mixed precision: in each block the tokens with the highest normalized "
              "attention at 4 bits, the rest at 2; keys channel-separable tokenwise, values per token";
  m.params = {
      ParamDef::integer("hi_bits", 4, 3, 8, "bits of the salient tokens (above lo_bits)"),
      ParamDef::integer("lo_bits", 2, 2, 7, "bits of the other tokens"),
      ParamDef::real("hi_fraction", 0.6, 0.0, 1.0,
                     "fraction of each block's tokens stored at hi_bits (round(hi_fraction * block))"),
      ParamDef::integer("block", 64, 8, 4096,
                        "tokens per block: saliency ranking, bitmap and key channel scales are per block"),
      ParamDef::choice("saliency", {"attention", "key_norm"}, "attention",
                       "what ranks the tokens: the normalized attention the queries gave them, or "
                       "each token's own norm (keys: key norm, values: value norm)"),
      ParamDef::integer("residual", 128, 0, 1 << 20, "most recent tokens kept in fp16"),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    const long hi = p.get_int("hi_bits"), lo = p.get_int("lo_bits"), block = p.get_int("block");
    const double fraction = p.get_float("hi_fraction");
    const size_t d = s.head_dim;
    require(lo >= 2 && lo <= 7, "zipcache",
            "lo_bits=" + std::to_string(lo) + " is out of range; expected 2..7");
    require(hi > lo && hi <= 8, "zipcache",
            "hi_bits=" + std::to_string(hi) + " is not in lo_bits+1..8 (lo_bits=" +
                                    std::to_string(lo) + "); expected hi_bits > lo_bits");
    require(fraction >= 0.0 && fraction <= 1.0, "zipcache",
            "hi_fraction=" + std::to_string(fraction) + " is out of range; expected 0..1");
    require(block >= 8 && block <= 4096, "zipcache",
            "block=" + std::to_string(block) + " is out of range; expected 8..4096");
    require(d >= 1, "zipcache", "head_dim 0; expected at least 1");
    const auto saliency = p.get_choice("saliency") == "attention" ? zipcache::Saliency::Attention
                                                                   : zipcache::Saliency::Norm;
    const size_t g = static_cast<size_t>(block), k = zipcache::salient_tokens(fraction, g);
    auto codec = [&](bool keys) {
      return std::make_unique<zipcache::ZipCacheCodec>(d, g, k, static_cast<unsigned>(hi),
                                                       static_cast<unsigned>(lo), keys, saliency);
    };
    LayerCodecs c;
    c.key = codec(true);
    c.value = codec(false);
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return c;
  };
  return m;
}

}  // namespace veloxquant
