#include <algorithm>
#include <string>

#include "codecs/common/artifacts_param.h"
#include "codecs/polar/method.h"
#include "codecs/polar/polar_codec.h"
#include "core/rng.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {
constexpr uint64_t kKeyRotationStream = 0x706f6c6b;    // "polk"
constexpr uint64_t kValueRotationStream = 0x706f6c76;  // "polv"

// A block of 2^levels coordinates must divide head_dim, so the depth is capped at the number of
// factors of two in head_dim: head_dim 128 keeps the paper's 4 (up to 7), head_dim 8 gets 3,
// 80 and 96 get 4. An odd head_dim has no coordinate pairs for level 1.
size_t effective_levels(size_t levels, size_t head_dim) {
  if (head_dim == 0) throw SpecError("polar: head_dim 0; expected an even head_dim of at least 2");
  if (head_dim % 2 != 0) {
    throw SpecError("polar: head_dim " + std::to_string(head_dim) +
                    " is odd; expected an even head_dim (level 1 pairs coordinates)");
  }
  size_t twos = 0;
  while ((head_dim >> twos) % 2 == 0) ++twos;
  return std::min(levels, twos);
}
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
                        "polar recursion levels: one fp16 radius per 2^levels coordinates (paper: "
                        "4); min(levels, factors of two in head_dim) are used, e.g. 3 at head_dim 8"),
      ParamDef::integer("bits1", 4, 1, 8, "bits per level-1 angle, uniform on [0, 2pi) (paper: 4)"),
      ParamDef::integer("bits", 2, 1, 8, "bits per angle of levels 2 and deeper (paper: 2)"),
      ParamDef::integer("residual", 128, 0, 1 << 20, "most recent tokens kept in fp16"),
      artifacts_param(false),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    PolarConfig cfg;
    cfg.dim = s.head_dim;
    cfg.levels = effective_levels(static_cast<size_t>(p.get_int("levels")), s.head_dim);
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
