// veloxquant.methods(): the registry's catalogue, the same entries and help text as
// `veloxquant methods`.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "bindings.h"
#include "veloxquant/cuda.h"
#include "veloxquant/method.h"

namespace nb = nanobind;

namespace veloxquant::python {
namespace {

const char* type_name(ParamType t) {
  switch (t) {
    case ParamType::Int: return "int";
    case ParamType::Float: return "float";
    case ParamType::Bool: return "bool";
    case ParamType::Choice: return "choice";
    case ParamType::Text: return "text";
  }
  return "?";
}

bool is_policy(const MethodInfo& m) { return static_cast<bool>(m.make_policy); }

// Every method's name, summary and parameters: the docstring of methods(), built from the
// registry when the module loads so it cannot drift from the catalogue.
std::string catalogue_text() {
  std::string text =
      "The registered methods: quantizers (how tokens are stored), then eviction policies (which\n"
      "tokens a cache keeps). Name one in a spec string, e.g. 'kivi:kbits=2,vbits=2' or\n"
      "'snapkv:budget=1024+kivi'.\n\n";
  for (const auto* list : {&registered_methods(), &registered_policies()}) {
    for (const MethodInfo& m : *list) {
      text += m.name + "  [" + m.family + "]\n    " + m.summary + "\n" + describe_params(m);
    }
  }
  return text;
}

}  // namespace

void bind_methods(nb::module_& m) {
  nb::class_<ParamDef>(m, "Param", "A method parameter: type, default, allowed range or choices, help.")
      .def_ro("name", &ParamDef::name)
      .def_prop_ro("type", [](const ParamDef& p) { return type_name(p.type); },
                   "'int', 'float', 'bool', 'choice' or 'text'")
      .def_prop_ro("default", &ParamDef::format_default, "the default as a spec writes it")
      .def_ro("min", &ParamDef::min, "inclusive lower bound (int and float)")
      .def_ro("max", &ParamDef::max, "inclusive upper bound (int and float)")
      .def_ro("choices", &ParamDef::choices)
      .def_ro("help", &ParamDef::help)
      .def("describe", &ParamDef::describe, "'2 (1..8)', 'mse (mse|fp16)': default and range")
      .def("__repr__", [](const ParamDef& p) { return "<Param " + p.name + "=" + p.describe() + ">"; });

  nb::class_<MethodInfo>(m, "Method", "A registered compression method or eviction policy.")
      .def_ro("name", &MethodInfo::name, "the spec name, e.g. 'kivi'")
      .def_ro("family", &MethodInfo::family)
      .def_ro("paper", &MethodInfo::paper)
      .def_ro("summary", &MethodInfo::summary)
      .def_ro("params", &MethodInfo::params)
      .def_prop_ro("kind", [](const MethodInfo& info) { return is_policy(info) ? "policy" : "quantizer"; },
                   "'quantizer' (how tokens are stored) or 'policy' (which tokens are kept)")
      .def_prop_ro("cross_layer", &MethodInfo::cross_layer,
                   "whether adjacent layers of a model share codes (minicache, xquant)")
      .def_prop_ro("calibrated", &MethodInfo::calibrated,
                   "whether its spec needs artifacts=DIR from `veloxquant calibrate` (kvquant_nuq)")
      .def_prop_ro("help", [](const MethodInfo& info) { return info.summary + "\n" + describe_params(info); },
                   "the summary and one line per parameter, as `veloxquant methods` prints them")
      .def("__repr__", [](const MethodInfo& info) { return "<Method " + info.name + ">"; });

  static const std::string doc = catalogue_text();
  m.def("methods", [] {
    std::vector<const MethodInfo*> all;
    for (const MethodInfo& info : registered_methods()) all.push_back(&info);
    for (const MethodInfo& info : registered_policies()) all.push_back(&info);
    return all;
  }, nb::rv_policy::reference, doc.c_str());

  m.def("canonical_spec", [](const std::string& spec) { return parse_spec(spec).to_string(); },
        nb::arg("spec"),
        "The spec with every parameter written out in declared order; raises SpecError naming the "
        "parameter and its allowed values when a value is unknown or outside its declared range "
        "(constraints between values are checked when a Codec or Cache is built).");

  m.def("cuda_unsupported",
        [](const std::string& spec, size_t kv_heads, size_t head_dim) -> std::optional<std::string> {
          const cuda::Support s = cuda::supports(parse_spec(spec), LayerShape{kv_heads, head_dim});
          if (s) return std::nullopt;
          return s.reason;
        },
        nb::arg("spec"), nb::kw_only(), nb::arg("kv_heads"), nb::arg("head_dim"),
        "None when the CUDA backend holds the spec for layers of kv_heads heads of head_dim, "
        "otherwise why not: the CPU-only method, parameter or head_dim, and what it expects. The "
        "backend's own rules, the ones DeviceCache and the runtime check; answered whether or not "
        "this build has the backend (cuda_available).");
}

}  // namespace veloxquant::python
