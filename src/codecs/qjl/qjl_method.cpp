#include <algorithm>
#include <memory>
#include <numeric>
#include <string>

#include "codecs/common/artifacts_param.h"
#include "codecs/kivi/kivi_value_codec.h"
#include "codecs/qjl/method.h"
#include "codecs/qjl/qjl_key_codec.h"
#include "core/rng.h"
#include "cuda/qjl/qjl_rules.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

constexpr uint64_t kKeyProjectionStream = 0x716a6c;  // "qjl"

// The key codec's sizes for this head_dim and its sketch seed, from the spec.
QjlKeyConfig key_config(const Params& p, const LayerShape& s) {
  QjlKeyConfig k;
  k.dim = s.head_dim;
  const size_t proj = static_cast<size_t>(p.get_int("proj"));
  const size_t outlier_proj = static_cast<size_t>(p.get_int("outlier_proj"));
  // The rules between the values as given, so that whether a spec is valid does not depend on
  // the head_dim that caps them below.
  require(proj % 8 == 0, "qjl",
          "proj=" + std::to_string(proj) + "; expected a multiple of 8 (whole bytes of signs)");
  require(outlier_proj % 8 == 0 && outlier_proj <= proj, "qjl",
          "outlier_proj=" + std::to_string(outlier_proj) + "; expected a multiple of 8 in 8..proj (" +
              std::to_string(proj) + ")");
  // Small heads: a sketch is only worth storing while it is well below the fp16 key (16 bits per
  // channel), so proj is capped at 8 bits per channel and outlier_proj at 4 (whole bytes, at
  // least one). The paper's m = 256 (512 in early layers) and 128 for head_dim 128 are 2 (4) and
  // 1 bits per channel: head_dim 32 and up keep the defaults; head_dim 8 gets a 64-bit sketch.
  // min() keeps outlier_proj <= proj.
  const auto cap = [&](size_t bits, size_t per_channel) {
    return std::min(bits, std::max<size_t>(8, per_channel * s.head_dim / 8 * 8));
  };
  k.proj = cap(proj, 8);
  k.outlier_proj = cap(outlier_proj, 4);
  // The paper's 8 outlier channels are 1/16 of head_dim 128, and no head splits off a larger
  // share: below head_dim 16 there is no split. (At head_dim 8 two split-off channels would get
  // a 32-bit sketch of their own, which measured worse than one 64-bit sketch of the whole key.)
  k.outliers = std::min(static_cast<size_t>(p.get_int("outliers")), s.head_dim / 16);
  k.group = static_cast<size_t>(p.get_int("group"));
  k.seed = derive_seed(s.seed, {static_cast<uint64_t>(s.layer), kKeyProjectionStream});
  return k;
}

}  // namespace

MethodInfo qjl_method() {
  MethodInfo m;
  m.name = "qjl";
  m.family = "qjl";
  m.paper = "Zandieh, Daliri & Han, AAAI 2025, arXiv 2406.03482";
  m.summary =
      "keys: signs of a Gaussian JL projection plus norm, scored unbiasedly from the bits; values: "
      "per-token min/max";
  m.params = {
      ParamDef::integer("proj", 256, 8, 4096,
                        "sketch bits per key (m, a multiple of 8), at most 8 per channel "
                        "(min(proj, 8 head_dim) are used); paper: 256, 512 for early layers"),
      ParamDef::integer("outliers", 8, 0, 64,
                        "outlier channels per token group with their own sketch and norm, at most "
                        "head_dim/16 (min(outliers, head_dim/16) are used); 0 = off"),
      ParamDef::integer("outlier_proj", 128, 8, 4096,
                        "sketch bits of the outlier part (a multiple of 8, at most proj), at most 4 "
                        "per channel (min(outlier_proj, 4 head_dim) are used)"),
      ParamDef::integer("group", 32, 1, 1024, "tokens sharing one choice of outlier channels"),
      ParamDef::choice("vbits", {"2", "4", "8"}, "2", "bits per value (per-token min/max, as KIVI)"),
      ParamDef::integer("vgroup", 32, 16, 1024,
                        "value channels per min/max group (multiple of 16; min(vgroup, head_dim), "
                        "the last group of a token may be shorter)"),
      ParamDef::integer("residual", 128, 0, 1 << 20, "most recent tokens kept in fp16"),
      artifacts_param(false),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    const QjlKeyConfig k = key_config(p, s);
    LayerCodecs c;
    c.key = std::make_unique<QjlKeyCodec>(k);
    c.value = kivi::KiviValueCodec::create("qjl", s.head_dim, std::stol(p.get_choice("vbits")), "vbits",
                                           p.get_int("vgroup"), "vgroup");
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return c;
  };
  // Keys' signs and norms as the CPU codec stores them, from the sketch its seed draws; values as
  // KIVI's per-token codes.
  m.cuda_config = [](const Params& p, const LayerShape& s, cuda::CacheConfig& c) {
    const QjlKeyConfig k = key_config(p, s);
    c.format = "qjl";
    c.bits = static_cast<unsigned>(std::stoul(p.get_choice("vbits")));
    c.group = k.group;
    c.block = std::lcm<size_t>(k.group, 4);  // key groups and the values' blocks of 4
    c.residual = static_cast<size_t>(p.get_int("residual"));
    auto t = std::make_shared<cuda::QjlTables>();
    t->sketch = QjlKeyCodec::sketch_matrix(k.dim, k.proj, k.seed);
    t->proj = k.proj, t->outliers = k.outliers, t->outlier_proj = k.outlier_proj;
    t->value_group = std::min(static_cast<size_t>(p.get_int("vgroup")), s.head_dim);
    c.tables = std::move(t);
    return cuda::qjl_problem(c);
  };
  return m;
}

}  // namespace veloxquant
