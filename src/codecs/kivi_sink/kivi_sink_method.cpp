#include "codecs/kivi/method.h"
#include "codecs/kivi_sink/kivi_sink_key_codec.h"
#include "codecs/kivi_sink/method.h"

namespace veloxquant {

MethodInfo kivi_sink_method() {
  MethodInfo m;
  m.name = "kivi_sink";
  m.family = "kivi";
  m.paper = "Su & Yuan, KVSink, COLM 2025 (on KIVI, Liu et al., ICML 2024, arXiv 2402.02750)";
  m.summary = "KIVI with the most attended keys of each key group kept fp16 and left out of its "
              "scales (attention from the real queries; key norm without any)";
  // KIVI's parameters, with the same meaning, then the sinks.
  m.params = kivi_method().params;
  m.params.push_back(ParamDef::integer("sinks", 1, 0, 8, "keys per group kept fp16 and out of its grids (0: KIVI)"));
  m.params.push_back(ParamDef::choice("saliency", {"attention", "key_norm"}, "attention",
                                     "what finds the sinks: the real queries' attention, or the largest keys"));
  m.make = [](const Params& p, const LayerShape& s) {
    LayerCodecs c = kivi_method().make(p, s);  // validates KIVI's parameters
    // sinks <= 8 < 16 <= group: every group keeps tokens to quantize.
    const long sinks = p.get_int("sinks"), group = p.get_int("group");
    c.key = std::make_unique<kivi_sink::KiviSinkKeyCodec>(s.head_dim, static_cast<unsigned>(p.get_int("kbits")),
                                                          static_cast<size_t>(group), static_cast<size_t>(sinks),
                                                          p.get_choice("saliency") == "attention");
    return c;
  };
  return m;
}

}  // namespace veloxquant
