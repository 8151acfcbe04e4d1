#include "codecs/polar/method.h"
#include "codecs/polar/polar_codec.h"
#include "core/rng.h"

namespace veloxquant {
namespace {
constexpr uint64_t kKeyRotationStream = 0x706f6c6b;    // "polk"
constexpr uint64_t kValueRotationStream = 0x706f6c76;  // "polv"
}  // namespace

MethodInfo polar_method() {
  MethodInfo m;
  m.name = "polar";
  m.family = "polar";
  m.paper = "Han, Kacham, Karbasi, Mirrokni & Zandieh, arXiv 2502.02617 (PolarQuant)";
  m.summary =
      "random rotation, recursive polar transform, angles quantized with codebooks of their known "
      "distributions, one fp16 radius per block";
  m.params = {
      ParamDef::integer("levels", 4, 1, 12,
                        "polar recursion levels: one fp16 radius per 2^levels coordinates, which "
                        "must divide head_dim (paper: 4)"),
      ParamDef::integer("bits1", 4, 1, 8, "bits per level-1 angle, uniform on [0, 2pi) (paper: 4)"),
      ParamDef::integer("bits", 2, 1, 8, "bits per angle of levels 2 and deeper (paper: 2)"),
      ParamDef::integer("residual", 128, 0, 1 << 20, "most recent tokens kept in fp16"),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    PolarConfig cfg;
    cfg.dim = s.head_dim;
    cfg.levels = static_cast<size_t>(p.get_int("levels"));
    cfg.level1_bits = static_cast<unsigned>(p.get_int("bits1"));
    cfg.bits = static_cast<unsigned>(p.get_int("bits"));
    LayerCodecs c;
    cfg.seed = derive_seed(s.seed, {static_cast<uint64_t>(s.layer), kKeyRotationStream});
    c.key = std::make_unique<PolarCodec>(cfg);
    cfg.seed = derive_seed(s.seed, {static_cast<uint64_t>(s.layer), kValueRotationStream});
    c.value = std::make_unique<PolarCodec>(cfg);
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return c;
  };
  return m;
}

}  // namespace veloxquant
