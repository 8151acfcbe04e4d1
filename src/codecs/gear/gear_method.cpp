#include <algorithm>
#include <string>

#include "codecs/gear/gear_codec.h"
#include "codecs/gear/method.h"
#include "veloxquant/error.h"

namespace veloxquant {
MethodInfo gear_method() {
  MethodInfo m;
  m.name = "gear";
  m.family = "gear";
  m.paper = "Kang et al., GEAR, arXiv 2403.05527";
  m.summary = "2-bit min/max base (keys per channel, values per token) + low-rank residual + sparse "
              "largest residual entries, per block of tokens";
  m.params = {
      ParamDef::integer("bits", 2, 2, 4, "base quantization bits (2 or 4)"),
      ParamDef::integer("rank", 4, 0, 16, "rank of the residual approximation per block (0: none; at most min(block, head_dim))"),
      ParamDef::real("sparsity", 0.02, 0.0, 0.1, "fraction of each block's residual entries kept exactly (fp16 + position)"),
      ParamDef::integer("block", 64, 16, 1024, "tokens per block (multiple of 16): grids, factors and sparse entries are per block"),
      ParamDef::integer("residual", 128, 0, 1 << 20, "most recent tokens kept in fp16"),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    const long bits = p.get_int("bits"), rank = p.get_int("rank"), block = p.get_int("block");
    const double sparsity = p.get_float("sparsity");
    const size_t d = s.head_dim;
    require(bits == 2 || bits == 4, "gear",
            "bits=" + std::to_string(bits) + " is not supported; expected 2 or 4");
    require(block >= 16 && block <= 1024 && block % 16 == 0, "gear",
            "block=" + std::to_string(block) + " is not a multiple of 16 in 16..1024");
    require(d >= 1, "gear", "head_dim 0; expected at least 1");
    require(rank >= 0 && rank <= 16, "gear",
            "rank=" + std::to_string(rank) + " is out of range; expected 0..16");
    require(static_cast<size_t>(rank) <= std::min(static_cast<size_t>(block), d), "gear",
            "rank=" + std::to_string(rank) + " exceeds min(block, head_dim) = " +
                std::to_string(std::min(static_cast<size_t>(block), d)) + "; expected 0.." +
                std::to_string(std::min(static_cast<size_t>(block), d)));
    require(sparsity >= 0.0 && sparsity <= 0.1, "gear",
            "sparsity=" + std::to_string(sparsity) + " is out of range; expected 0..0.1");
    gear::GearConfig cfg;
    cfg.bits = static_cast<unsigned>(bits);
    cfg.rank = static_cast<size_t>(rank);
    cfg.sparsity = sparsity;
    cfg.block = static_cast<size_t>(block);
    LayerCodecs c;
    c.key = std::make_unique<gear::GearCodec>(d, gear::Axis::PerChannel, cfg);
    c.value = std::make_unique<gear::GearCodec>(d, gear::Axis::PerToken, cfg);
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return c;
  };
  return m;
}

}  // namespace veloxquant
