#include <algorithm>
#include <string>

#include "codecs/kivi/kivi_key_codec.h"
#include "codecs/kivi/kivi_value_codec.h"
#include "codecs/kivi/method.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

unsigned checked_bits(const Params& p, const char* name) {
  const long b = p.get_int(name);
  if (b != 2 && b != 4 && b != 8) {
    throw SpecError("kivi: " + std::string(name) + "=" + std::to_string(b) +
                    " is not supported; expected 2, 4 or 8 (codes are packed whole per byte)");
  }
  return static_cast<unsigned>(b);
}

void require(bool ok, const std::string& what) {
  if (!ok) throw SpecError("kivi: " + what);
}

}  // namespace

MethodInfo kivi_method() {
  MethodInfo m;
  m.name = "kivi";
  m.family = "kivi";
  m.paper = "Liu et al., KIVI, ICML 2024, arXiv 2402.02750";
  m.summary = "keys per channel and values per token, asymmetric min/max, recent tokens in fp16";
  m.params = {
      ParamDef::integer("kbits", 2, 2, 8, "key bits (2, 4 or 8)"),
      ParamDef::integer("vbits", 2, 2, 8, "value bits (2, 4 or 8)"),
      ParamDef::integer("group", 32, 16, 4096,
                        "tokens per key scale group and channels per value group (multiple of 16)"),
      ParamDef::integer("residual", 128, 0, 1 << 20, "most recent tokens kept in fp16"),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    const unsigned kb = checked_bits(p, "kbits"), vb = checked_bits(p, "vbits");
    const size_t group = static_cast<size_t>(p.get_int("group")), d = s.head_dim;
    require(group % 16 == 0, "group=" + std::to_string(group) + " is not a multiple of 16");
    const size_t vgroup = std::min(group, d);
    require(d % (32 / kb) == 0, "head_dim " + std::to_string(d) + " is not a multiple of " +
                                    std::to_string(32 / kb) + " (needed for kbits=" + std::to_string(kb) + ")");
    require(d % (128 / vb) == 0 && vgroup % 16 == 0 && d % vgroup == 0,
            "head_dim " + std::to_string(d) + " with vbits=" + std::to_string(vb) + ", group=" +
                std::to_string(group) + ": expected head_dim a multiple of " + std::to_string(128 / vb) +
                " and of the value group min(group, head_dim), itself a multiple of 16");
    LayerCodecs c;
    c.key = std::make_unique<kivi::KiviKeyCodec>(d, kb, group);
    c.value = std::make_unique<kivi::KiviValueCodec>(d, vb, group);
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return c;
  };
  return m;
}

}  // namespace veloxquant
