#include <string>

#include "codecs/cuda_bits.h"
#include "codecs/kivi/kivi_key_codec.h"
#include "codecs/kivi/kivi_value_codec.h"
#include "codecs/kivi/method.h"
#include "cuda/kivi/kivi_rules.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"

namespace veloxquant {
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
                        "tokens per key scale group (multiple of 16) and channels per value group "
                        "(min(group, head_dim); the last group of a token may be shorter)"),
      ParamDef::integer("residual", 128, 0, 1 << 20, "most recent tokens kept in fp16"),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    const long group = p.get_int("group");
    const size_t d = s.head_dim;
    LayerCodecs c;
    // Values first: their check also covers the bit widths and the group rule keys share. Any
    // head_dim works: lane tiles where it fits them, the dense layout elsewhere.
    c.value = kivi::KiviValueCodec::create("kivi", d, p.get_int("vbits"), "vbits", group, "group");
    const long kb = p.get_int("kbits");
    require(kb == 2 || kb == 4 || kb == 8, "kivi",
            "kbits=" + std::to_string(kb) + " is not supported; expected 2, 4 or 8 (codes are packed whole per byte)");
    c.key = std::make_unique<kivi::KiviKeyCodec>(d, static_cast<unsigned>(kb), static_cast<size_t>(group));
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return c;
  };
  m.cuda_config = [](const Params& p, const LayerShape&, cuda::CacheConfig& c) {
    c.format = "kivi";
    c.bits = cuda_equal_bits("kivi", p, "kbits", "vbits");
    c.group = static_cast<size_t>(p.get_int("group"));
    c.block = c.group;  // key blocks of group tokens hold the values' blocks of 4
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return cuda::kivi_problem(c);
  };
  return m;
}

}  // namespace veloxquant
