#include "codecs/ratequant/inner.h"

#include <fmt/format.h>

#include <algorithm>

#include "veloxquant/error.h"

namespace veloxquant::ratequant {
namespace {

bool is_bit_width(const ParamDef& p) {
  return p.type == ParamType::Int && (p.name == "bits" || p.name == "kbits" || p.name == "vbits");
}

// Why `inner` cannot be wrapped, "" when it can.
std::string unwrappable(const Spec& inner) {
  const MethodInfo& m = *inner.method;
  if (std::none_of(m.params.begin(), m.params.end(), is_bit_width)) {
    return "has no integer bit-width parameter (bits, kbits or vbits)";
  }
  if (m.calibrated()) return "is calibrated itself";
  if (m.cross_layer()) return "stores pairs of layers together";
  LayerCodecs c;
  try {  // a layer of one KV head at the most common head_dim: what the codecs are, not their sizes
    c = m.make(inner.params, LayerShape{1, 128, 0, 0});
  } catch (const SpecError&) {
    return "";  // parameters this shape refuses: make() with the real shape says why
  }
  if (c.key->fits_streams() || c.value->fits_streams()) return "fits its codecs to each stream's first tokens";
  if (c.key->wants_attention() || c.value->wants_attention()) return "stores each token by the attention it gets";
  return "";
}

}  // namespace

void check_inner(const Spec& inner) {
  const std::string why = unwrappable(inner);
  if (why.empty()) return;
  std::string usable;
  for (const MethodInfo& m : registered_methods()) {
    if (m.wrapper()) continue;
    Spec s;
    s.method = &m;
    s.params = resolve_params(m.name, m.params, {});
    if (unwrappable(s).empty()) usable += (usable.empty() ? "" : ", ") + m.name;
  }
  throw SpecError(fmt::format("ratequant cannot wrap {}: it {}; it allocates a bit width per KV head to "
                              "one of: {}", inner.method->name, why, usable));
}

Params params_at_bits(const Spec& inner, int bits) {
  Params p = inner.params;
  for (const ParamDef& def : inner.method->params)
    if (is_bit_width(def)) p.numbers[def.name] = bits;
  return p;
}

LayerCodecs make_at_bits(const Spec& inner, int bits, LayerShape shape) {
  shape.calibration = nullptr;
  return inner.method->make(params_at_bits(inner, bits), shape);
}

std::pair<int, int> bit_width_range(const Spec& inner) {
  double lo = 0, hi = 64;
  for (const ParamDef& def : inner.method->params) {
    if (!is_bit_width(def)) continue;
    lo = std::max(lo, def.min);
    hi = std::min(hi, def.max);
  }
  return {static_cast<int>(lo), static_cast<int>(hi)};
}

std::vector<int> accepted_bits(const Spec& inner, const LayerShape& shape) {
  const auto [lo, hi] = bit_width_range(inner);
  std::vector<int> bits;
  std::string refused;
  for (int b = lo; b <= hi; ++b) {
    try {
      make_at_bits(inner, b, shape);
      bits.push_back(b);
    } catch (const SpecError& e) {  // a width this quantizer or this head_dim does not support
      refused = e.what();
    }
  }
  if (bits.empty()) {
    throw SpecError(fmt::format("ratequant: {} accepts no bit width in {}..{} for head_dim {} ({})",
                                inner.to_string(), lo, hi, shape.head_dim, refused));
  }
  return bits;
}

}  // namespace veloxquant::ratequant
