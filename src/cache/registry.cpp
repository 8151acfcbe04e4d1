// The one list of compression methods. Adding a method: its own folder under src/codecs/, one
// line here, and its tests; the CLI, the conformance suite and the benchmarks find it here.
#include "codecs/cachegen/method.h"
#include "codecs/comm_vq/method.h"
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
#include "codecs/ratequant/method.h"
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
      comm_vq_method(),
      ratequant_method(),
  };
  return all;
}

const std::vector<MethodInfo>& registered_policies() {
  static const std::vector<MethodInfo> all = {
      snapkv_method(), streaming_llm_method(),      h2o_method(),
      tova_method(),   pyramidkv_method(),          squeeze_method(),
      adakv_method(),  expected_attention_method(), kvzip_method(),
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
  // Up to three parts joined by '+': an eviction policy, then the quantizer, which when it is a
  // wrapper is followed by its inner quantizer.
  std::vector<std::string_view> parts;
  for (size_t from = 0;;) {
    const size_t plus = text.find('+', from);
    parts.push_back(text.substr(from, plus == std::string_view::npos ? plus : plus - from));
    if (plus == std::string_view::npos) break;
    from = plus + 1;
  }
  Spec s;
  size_t at = 0;  // the quantizer's part
  const RawSpec first = parse_raw_spec(parts[0]);
  if (lookup(registered_policies(), first.method)) {
    s.eviction = &find_policy(first.method);
    s.eviction_params = resolve_params(first.method, s.eviction->params, first.args);
    at = 1;
  } else if (!lookup(registered_methods(), first.method)) {
    throw SpecError("unknown method '" + first.method + "'; expected a quantizer (" +
                    names_of(registered_methods()) + ") or an eviction policy (" +
                    names_of(registered_policies()) + ")");
  }
  const std::string_view quantizer = at < parts.size() ? parts[at] : "fp16";  // a policy alone keeps fp16
  const RawSpec raw = parse_raw_spec(quantizer);
  s.method = &find_method(raw.method);
  s.params = resolve_params(raw.method, s.method->params, raw.args);
  const size_t after = at + 1;  // the inner quantizer's part, for a wrapper
  if (s.method->wrapper()) {
    if (parts.size() > after + 1) {
      throw SpecError("spec '" + std::string(text) + "' continues after " + raw.method + "'s inner quantizer '" +
                      std::string(parts[after]) + "'; expected '" + raw.method + ":...+quantizer:...'");
    }
    const Spec inner = parse_spec(after < parts.size() ? parts[after] : s.method->default_inner);
    if (inner.eviction != nullptr || inner.method->wrapper()) {
      throw SpecError("spec '" + std::string(text) + "': " + raw.method + " wraps a quantizer; got '" +
                      inner.to_string() + "', expected a quantizer that is not " +
                      (inner.eviction ? "an eviction policy" : "a wrapper itself"));
    }
    s.method->check_inner(inner);
    s.params.strings["inner"] = inner.to_string();
  } else if (parts.size() > after) {
    const std::string next = parse_raw_spec(parts[after]).method;
    const std::string why = lookup(registered_policies(), next)
                                ? " ('" + next + "' is an eviction policy: write it first, as in '" + next + "+" +
                                      raw.method + "')"
                                : "";
    throw SpecError("spec '" + std::string(text) + "' continues after the quantizer '" + raw.method + "' with '+" +
                    std::string(parts[after]) + "'" + why + "; expected 'quantizer:...', 'policy:...+quantizer:...' "
                    "or a wrapper before its quantizer ('ratequant:...+quantizer:...')");
  }
  return s;
}

std::string Spec::to_string() const {
  if (method == nullptr) throw SpecError("empty Spec has no text");
  std::string q = format_spec(method->name, method->params, params);
  if (method->wrapper()) q += "+" + params.get_text("inner");
  if (eviction == nullptr) return q;
  return format_spec(eviction->name, eviction->params, eviction_params) + "+" + q;
}

}  // namespace veloxquant
