#include <string>

#include "codecs/kivi/kivi_value_codec.h"
#include "codecs/svdq/method.h"
#include "codecs/svdq/svdq_key_codec.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

// parts8 eighths of the latent channels at 8 bits, then parts4 at 4, parts2 at 2, the rest
// dropped: non-increasing bits by construction.
svdq::Schedule schedule_of(long parts8, long parts4, long parts2) {
  const std::string given = "parts8=" + std::to_string(parts8) + ", parts4=" + std::to_string(parts4) +
                            ", parts2=" + std::to_string(parts2);
  const long kept = parts8 + parts4 + parts2;
  require(kept >= 1, "svdq", given + " keep no latent channel; expected at least one eighth");
  require(kept <= static_cast<long>(svdq::kParts), "svdq",
          given + " add up to " + std::to_string(kept) + " eighths; expected at most 8");
  svdq::Schedule s{};
  for (long p = 0; p < kept; ++p) s[static_cast<size_t>(p)] = p < parts8 ? 8 : p < parts8 + parts4 ? 4 : 2;
  return s;
}

}  // namespace

MethodInfo svdq_method() {
  MethodInfo m;
  m.name = "svdq";
  m.family = "svdq";
  m.paper = "Hong et al., SVDq, arXiv 2502.15304";
  m.summary = "keys projected on the SVD basis of each head's prompt keys, latent channels quantized "
              "per channel with bits by singular value (trailing ones dropped), KIVI values";
  m.params = {
      ParamDef::integer("parts8", 1, 0, 8,
                        "eighths of the latent channels, leading (largest singular value) first, at 8 bits"),
      ParamDef::integer("parts4", 2, 0, 8, "the next eighths at 4 bits"),
      ParamDef::integer("parts2", 2, 0, 8,
                        "the next eighths at 2 bits; the rest are dropped (parts8 + parts4 + parts2 in 1..8)"),
      ParamDef::integer("vbits", 2, 2, 8, "value bits (2, 4 or 8), KIVI's per-token groups"),
      ParamDef::integer("group", 32, 16, 4096,
                        "tokens per key block (multiple of 16) and channels per value group "
                        "(min(group, head_dim))"),
      ParamDef::integer("residual", 128, 0, 1 << 20, "most recent tokens kept in fp16"),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    const long group = p.get_int("group");
    const size_t d = s.head_dim;
    LayerCodecs c;
    // Values first: their check also covers the group rule the keys share, and head_dim 0.
    c.value = kivi::KiviValueCodec::create("svdq", d, p.get_int("vbits"), "vbits", group, "group");
    const svdq::Schedule schedule = schedule_of(p.get_int("parts8"), p.get_int("parts4"), p.get_int("parts2"));
    c.key = std::make_unique<svdq::SvdqKeyCodec>(d, schedule, static_cast<size_t>(group));
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return c;
  };
  return m;
}

}  // namespace veloxquant
