#include <string>

#include "codecs/kivi/kivi_value_codec.h"
#include "codecs/qjl/method.h"
#include "codecs/qjl/qjl_key_codec.h"
#include "core/rng.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

constexpr uint64_t kKeyProjectionStream = 0x716a6c;  // "qjl"

// KiviValueCodec's preconditions, checked here so that a bad spec is a SpecError naming the value.
void check_values(size_t dim, long bits, long group) {
  const std::string at = "qjl: head_dim " + std::to_string(dim);
  if (group % 16 != 0) {
    throw SpecError("qjl: vgroup=" + std::to_string(group) + "; expected a multiple of 16");
  }
  if (static_cast<size_t>(group) <= dim && dim % static_cast<size_t>(group) != 0) {
    throw SpecError(at + " is not a multiple of vgroup=" + std::to_string(group) +
                    "; expected vgroup to divide head_dim (or exceed it)");
  }
  const size_t quad = 128 / static_cast<size_t>(bits);
  if (dim % quad != 0) {
    throw SpecError(at + " with vbits=" + std::to_string(bits) + " needs head_dim a multiple of " +
                    std::to_string(quad));
  }
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
    const long vbits = std::stol(p.get_choice("vbits")), vgroup = p.get_int("vgroup");
    check_values(s.head_dim, vbits, vgroup);
    QjlKeyConfig k;
    k.dim = s.head_dim;
    k.proj = static_cast<size_t>(p.get_int("proj"));
    k.outliers = static_cast<size_t>(p.get_int("outliers"));
    k.outlier_proj = static_cast<size_t>(p.get_int("outlier_proj"));
    k.group = static_cast<size_t>(p.get_int("group"));
    k.seed = derive_seed(s.seed, {static_cast<uint64_t>(s.layer), kKeyProjectionStream});
    LayerCodecs c;
    c.key = std::make_unique<QjlKeyCodec>(k);
    c.value = std::make_unique<kivi::KiviValueCodec>(s.head_dim, static_cast<unsigned>(vbits),
                                                     static_cast<size_t>(vgroup));
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return c;
  };
  return m;
}

}  // namespace veloxquant
