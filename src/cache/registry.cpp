// The one list of compression methods. Adding a method: its own folder under src/codecs/, one
// line here, and its tests; the CLI, the conformance suite and the benchmarks find it here.
#include "codecs/fp16/method.h"
#include "codecs/kivi/method.h"
#include "codecs/polar/method.h"
#include "codecs/qjl/method.h"
#include "codecs/turboquant/method.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace veloxquant {

const std::vector<MethodInfo>& registered_methods() {
  static const std::vector<MethodInfo> all = {
      fp16_method(),
      kivi_method(),
      turboquant_mse_method(),
      turboquant_prod_method(),
      turboquant_rvq_method(),
      qjl_method(),
      polar_method(),
  };
  return all;
}

const MethodInfo& find_method(std::string_view name) {
  std::string names;
  for (const auto& m : registered_methods()) {
    if (m.name == name) return m;
    names += (names.empty() ? "" : ", ") + m.name;
  }
  throw SpecError("unknown method '" + std::string(name) + "'; expected one of: " + names);
}

Spec parse_spec(std::string_view text) {
  const RawSpec raw = parse_raw_spec(text);
  Spec s;
  s.method = &find_method(raw.method);
  s.params = resolve_params(raw.method, s.method->params, raw.args);
  return s;
}

std::string Spec::to_string() const {
  if (method == nullptr) throw SpecError("empty Spec has no text");
  return format_spec(method->name, method->params, params);
}

}  // namespace veloxquant
