// The one list of compression methods. Adding a method: its own folder under src/codecs/, one
// line here, and its tests; the CLI, the conformance suite and the benchmarks find it here.
#include "codecs/cachegen/method.h"
#include "codecs/fp16/method.h"
#include "codecs/gear/method.h"
#include "codecs/kivi/method.h"
#include "codecs/kivi_sink/method.h"
#include "codecs/kvquant/method.h"
#include "codecs/kitty/method.h"
#include "codecs/minicache/method.h"
#include "codecs/palu/method.h"
#include "codecs/polar/method.h"
#include "codecs/qjl/method.h"
#include "codecs/rabitq/method.h"
#include "codecs/spectral/method.h"
#include "codecs/svdq/method.h"
#include "codecs/turboquant/method.h"
#include "codecs/vecinfer/method.h"
#include "codecs/xquant/method.h"
#include "codecs/zipcache/method.h"
#include "cache/eviction/methods.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace veloxquant {

const std::vector<MethodInfo>& registered_methods() {
  static const std::vector<MethodInfo> all = {
      fp16_method(),
      kivi_method(),
      kivi_sink_method(),
      turboquant_mse_method(),
      turboquant_prod_method(),
      turboquant_rvq_method(),
      qjl_method(),
      polar_method(),
      cachegen_method(),
      gear_method(),
      kitty_method(),
      kvquant_nuq_method(),
      zipcache_method(),
      palu_method(),
      svdq_method(),
      minicache_method(),
      xquant_method(),
      rabitq_method(),
      spectral_method(),
      vecinfer_method(),
  };
  return all;
}

const std::vector<MethodInfo>& registered_policies() {
  static const std::vector<MethodInfo> all = {
      snapkv_method(),
      streaming_llm_method(),
      h2o_method(),
      tova_method(),
      pyramidkv_method(),
      squeeze_method(),
      adakv_method(),
  };
  return all;
}

namespace {

std::string names_of(const std::vector<MethodInfo>& list) {
  std::string names;
  for (const auto& m : list) names += (names.empty() ? "" : ", ") + m.name;
  return names;
}

const MethodInfo* lookup(const std::vector<MethodInfo>& list, std::string_view name) {
  for (const auto& m : list)
    if (m.name == name) return &m;
  return nullptr;
}

}  // namespace

const MethodInfo& find_method(std::string_view name) {
  if (const MethodInfo* m = lookup(registered_methods(), name)) return *m;
  const std::string also = lookup(registered_policies(), name)
                               ? " ('" + std::string(name) + "' is an eviction policy: write it first, as in '" +
                                     std::string(name) + "+kivi')"
                               : "";
  throw SpecError("unknown quantizer '" + std::string(name) + "'; expected one of: " +
                  names_of(registered_methods()) + also);
}

const MethodInfo& find_policy(std::string_view name) {
  if (const MethodInfo* m = lookup(registered_policies(), name)) return *m;
  throw SpecError("unknown eviction policy '" + std::string(name) + "'; expected one of: " +
                  names_of(registered_policies()));
}

Spec parse_spec(std::string_view text) {
  Spec s;
  const size_t plus = text.find('+');
  std::string_view quantizer = text;
  if (plus != std::string_view::npos) {
    if (text.find('+', plus + 1) != std::string_view::npos) {
      throw SpecError("spec '" + std::string(text) + "' has more than one '+'; expected "
                      "'policy:...+quantizer:...'");
    }
    quantizer = text.substr(plus + 1);
    const RawSpec raw = parse_raw_spec(text.substr(0, plus));
    s.eviction = &find_policy(raw.method);
    s.eviction_params = resolve_params(raw.method, s.eviction->params, raw.args);
  } else {
    const RawSpec raw = parse_raw_spec(text);
    if (!lookup(registered_methods(), raw.method) && !lookup(registered_policies(), raw.method)) {
      throw SpecError("unknown method '" + raw.method + "'; expected a quantizer (" +
                      names_of(registered_methods()) + ") or an eviction policy (" +
                      names_of(registered_policies()) + ")");
    }
    if (lookup(registered_policies(), raw.method)) {  // a policy alone keeps its tokens in fp16
      s.eviction = &find_policy(raw.method);
      s.eviction_params = resolve_params(raw.method, s.eviction->params, raw.args);
      quantizer = "fp16";
    }
  }
  const RawSpec raw = parse_raw_spec(quantizer);
  s.method = &find_method(raw.method);
  s.params = resolve_params(raw.method, s.method->params, raw.args);
  return s;
}

std::string Spec::to_string() const {
  if (method == nullptr) throw SpecError("empty Spec has no text");
  const std::string q = format_spec(method->name, method->params, params);
  if (eviction == nullptr) return q;
  return format_spec(eviction->name, eviction->params, eviction_params) + "+" + q;
}

}  // namespace veloxquant
