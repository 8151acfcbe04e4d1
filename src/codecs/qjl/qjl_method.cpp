#include <string>

#include "codecs/kivi/kivi_value_codec.h"
#include "codecs/qjl/method.h"
#include "codecs/qjl/qjl_key_codec.h"
#include "core/rng.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

constexpr uint64_t kKeyProjectionStream = 0x716a6c;  // "qjl"

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
                        "sketch bits per key (m, a multiple of 8); paper: 256, 512 for early layers"),
      ParamDef::integer("outliers", 8, 0, 64,
                        "outlier channels per token group with their own sketch and norm; 0 = off"),
      ParamDef::integer("outlier_proj", 128, 8, 4096,
                        "sketch bits of the outlier part (a multiple of 8, at most proj)"),
      ParamDef::integer("group", 32, 1, 1024, "tokens sharing one choice of outlier channels"),
      ParamDef::choice("vbits", {"2", "4", "8"}, "2", "bits per value (per-token min/max, as KIVI)"),
      ParamDef::integer("vgroup", 32, 16, 1024, "value channels per min/max group (multiple of 16)"),
      ParamDef::integer("residual", 128, 0, 1 << 20, "most recent tokens kept in fp16"),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    QjlKeyConfig k;
    k.dim = s.head_dim;
    k.proj = static_cast<size_t>(p.get_int("proj"));
    k.outliers = static_cast<size_t>(p.get_int("outliers"));
    k.outlier_proj = static_cast<size_t>(p.get_int("outlier_proj"));
    k.group = static_cast<size_t>(p.get_int("group"));
    k.seed = derive_seed(s.seed, {static_cast<uint64_t>(s.layer), kKeyProjectionStream});
    LayerCodecs c;
    c.key = std::make_unique<QjlKeyCodec>(k);
    c.value = kivi::KiviValueCodec::create("qjl", s.head_dim, std::stol(p.get_choice("vbits")), "vbits",
                                           p.get_int("vgroup"), "vgroup");
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return c;
  };
  return m;
}

}  // namespace veloxquant
