#include <algorithm>
#include <cmath>
#include <string>

#include "codecs/palu/method.h"
#include "codecs/palu/palu_codec.h"
#include "veloxquant/error.h"

namespace veloxquant {
MethodInfo palu_method() {
  MethodInfo m;
  m.name = "palu";
  m.family = "palu";
  m.paper = "Chang et al., Palu: Compressing KV-Cache with Low-Rank Projection, ICLR 2025, arXiv 2407.21118";
  m.summary = "keys and values projected on a rank-r basis fitted at prefill per group of KV heads "
              "(SVD), latents Hadamard-rotated and quantized per token, leading singular "
              "directions at more bits";
  m.params = {
      ParamDef::real("rank_ratio", 0.5, 0.0, 1.0, "latent rank as a fraction of head_dim: rank = round(rank_ratio * head_dim), at least 1"),
      ParamDef::real("hi_fraction", 0.25, 0.0, 1.0, "fraction of the latent channels (the leading singular directions) stored at hi_bits: round(hi_fraction * rank)"),
      ParamDef::integer("hi_bits", 4, 1, 8, "bits of the leading latent channels"),
      ParamDef::integer("lo_bits", 2, 1, 8, "bits of the other latent channels, at most hi_bits"),
      ParamDef::integer("group", 4, 1, 256, "KV heads sharing one basis (G-LRD); at most the layer's KV heads, the last group smaller when it does not divide them"),
      ParamDef::boolean("hadamard", true, "Walsh-Hadamard transform of each part's latents before quantization (folded into the basis)"),
      ParamDef::integer("residual", 128, 0, 1 << 20, "most recent tokens kept in fp16"),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    const double ratio = p.get_float("rank_ratio"), hi_fraction = p.get_float("hi_fraction");
    const long hi_bits = p.get_int("hi_bits"), lo_bits = p.get_int("lo_bits"), group = p.get_int("group");
    const size_t d = s.head_dim;
    require(ratio > 0.0 && ratio <= 1.0, "palu",
            "rank_ratio=" + std::to_string(ratio) + " is out of range; expected above 0, at most 1");
    require(hi_fraction >= 0.0 && hi_fraction <= 1.0, "palu",
            "hi_fraction=" + std::to_string(hi_fraction) + " is out of range; expected 0..1");
    require(hi_bits >= 1 && hi_bits <= 8, "palu",
            "hi_bits=" + std::to_string(hi_bits) + " is out of range; expected 1..8");
    require(lo_bits >= 1 && lo_bits <= hi_bits, "palu",
            "lo_bits=" + std::to_string(lo_bits) + " is out of range; expected 1..hi_bits (" + std::to_string(hi_bits) + ")");
    require(group >= 1, "palu", "group=" + std::to_string(group) + " is out of range; expected at least 1");
    require(d >= 1, "palu", "head_dim 0; expected at least 1");
    palu::PaluConfig cfg;
    cfg.dim = d;
    cfg.rank = std::clamp<size_t>(static_cast<size_t>(std::lround(ratio * static_cast<double>(d))), 1, d);
    cfg.hi = std::min(cfg.rank, static_cast<size_t>(std::lround(hi_fraction * static_cast<double>(cfg.rank))));
    cfg.hi_bits = static_cast<unsigned>(hi_bits);
    cfg.lo_bits = static_cast<unsigned>(lo_bits);
    cfg.hadamard = p.get_bool("hadamard");
    cfg.group = static_cast<size_t>(group);
    LayerCodecs c;
    cfg.stream = "key";
    c.key = std::make_unique<palu::PaluCodec>(cfg);
    cfg.stream = "value";
    c.value = std::make_unique<palu::PaluCodec>(cfg);
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return c;
  };
  return m;
}

}  // namespace veloxquant
