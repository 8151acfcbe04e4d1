#include <string>

#include "codecs/cachegen/cachegen_codec.h"
#include "codecs/cachegen/method.h"
#include "veloxquant/error.h"

namespace veloxquant {

MethodInfo cachegen_method() {
  MethodInfo m;
  m.name = "cachegen";
  m.family = "cachegen";
  m.paper = "Liu et al., CacheGen, SIGCOMM 2024, arXiv 2310.07240";
  m.summary = "group quantization, token-wise delta of the codes, rANS-coded blocks stored at their coded size";
  m.params = {
      ParamDef::integer("bits", 4, 2, 8, "bits per code (keys per channel, values per token group)"),
      ParamDef::integer("block", 64, 2, 4096, "tokens per coded block (the first is the delta anchor)"),
      ParamDef::integer("group", 32, 1, 4096, "channels per value group (min(group, head_dim))"),
      ParamDef::integer("residual", 0, 0, 1 << 20, "most recent tokens kept in fp16"),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    const auto bits = static_cast<unsigned>(p.get_int("bits"));
    const auto block = static_cast<size_t>(p.get_int("block"));
    const auto group = static_cast<size_t>(p.get_int("group"));
    if (s.head_dim == 0) throw SpecError("cachegen: head_dim 0");
    LayerCodecs c;
    c.key = std::make_unique<cachegen::CachegenCodec>(cachegen::Stream::Keys, s.head_dim, bits, block, group);
    c.value = std::make_unique<cachegen::CachegenCodec>(cachegen::Stream::Values, s.head_dim, bits, block, group);
    c.residual = static_cast<size_t>(p.get_int("residual"));
    return c;
  };
  return m;
}

}  // namespace veloxquant
