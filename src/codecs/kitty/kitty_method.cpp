#include <memory>
#include <string>

#include "codecs/kitty/kitty_key_codec.h"
#include "codecs/kitty/method.h"
#include "codecs/kivi/kivi_value_codec.h"
#include "cuda/kitty/kitty_rules.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"

namespace veloxquant {
MethodInfo kitty_method() {
  MethodInfo m;
  m.name = "kitty";
  m.family = "kitty";
  m.paper = "KITTY: 2-bit KV cache quantization with dynamic channel-wise precision boost";
  m.summary = "KIVI-style 2-bit keys per channel with the widest key channels of each block boosted "
              "to 4 bits (mask stored per block), KIVI values, recent tokens in fp16";
  m.params = {
      ParamDef::integer("bits", 2, 1, 8, "key bits of the channels not boosted (2 or 4)"),
      ParamDef::integer("high_bits", 4, 1, 8, "key bits of the boosted channels (4 or 8, above bits)"),
      ParamDef::real("boost", 0.125, 0.0, 0.5,
                     "fraction of key channels boosted per block (round(boost * head_dim) channels)"),
      ParamDef::integer("vbits", 2, 2, 8, "value bits (2, 4 or 8), KIVI's per-token groups"),
      ParamDef::integer("group", 32, 16, 4096,
                        "tokens per key block (multiple of 16) and channels per value group "
                        "(min(group, head_dim))"),
      ParamDef::integer("residual", 128, 0, 1 << 20, "most recent tokens kept in fp16"),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    const long bits = p.get_int("bits"), high = p.get_int("high_bits"), group = p.get_int("group");
    const double boost = p.get_float("boost");
    const size_t d = s.head_dim;
    LayerCodecs c;
    // Values first: their check also covers the group rule the keys share.
    c.value = kivi::KiviValueCodec::create("kitty", d, p.get_int("vbits"), "vbits", group, "group");
    require(bits == 2 || bits == 4, "kitty",
            "bits=" + std::to_string(bits) + " is not supported; expected 2 or 4");
    require(high == 4 || high == 8, "kitty",
            "high_bits=" + std::to_string(high) + " is not supported; expected 4 or 8");
    require(high > bits, "kitty",
            "high_bits=" + std::to_string(high) + " is not above bits=" + std::to_string(bits) +
                             "; expected high_bits > bits");
    require(boost >= 0.0 && boost <= 0.5, "kitty",
            "boost=" + std::to_string(boost) + " is out of range; expected 0..0.5");
    require(d >= 1, "kitty", "head_dim 0; expected at least 1");
    c.key = std::make_unique<kitty::KittyKeyCodec>(d, static_cast<unsigned>(bits), static_cast<unsigned>(high),
                                                   kitty::boost_channels(boost, d), static_cast<size_t>(group));
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return c;
  };
  // The CPU codec's key blocks and KIVI's values; the GPU decodes each tile of keys into fp16 rows
  // (the channel order of a block's codes follows its mask) and sums the values on their codes.
  m.cuda_config = [](const Params& p, const LayerShape& s, cuda::CacheConfig& c) {
    c.format = "kitty";
    c.bits = static_cast<unsigned>(p.get_int("vbits"));
    c.group = static_cast<size_t>(p.get_int("group"));
    c.block = c.group;  // key blocks of group tokens hold the values' blocks of 4
    c.residual = static_cast<size_t>(p.get_int("residual"));
    auto t = std::make_shared<cuda::KittyTables>();
    t->key_bits = static_cast<unsigned>(p.get_int("bits"));
    t->high_bits = static_cast<unsigned>(p.get_int("high_bits"));
    t->boosted = kitty::boost_channels(p.get_float("boost"), s.head_dim);
    c.tables = std::move(t);
    return cuda::kitty_problem(c);
  };
  m.cuda_attention = "on fp16 key rows decoded tile by tile in shared memory, values on their codes";
  return m;
}

}  // namespace veloxquant
