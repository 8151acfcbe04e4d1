// The method registry: every compression method declares its parameters and builds the codecs
// of one cache layer. One list, one line per method (src/cache/registry.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "veloxquant/codec.h"
#include "veloxquant/spec.h"

namespace veloxquant {

// What a method needs to know about the layer it compresses.
struct LayerShape {
  size_t kv_heads = 1;
  size_t head_dim = 128;
  int layer = 0;       // mixed into random choices so layers get independent rotations
  uint64_t seed = 0;   // same seed, same bytes
};

// The codecs of one layer: one for keys, one for values, and how many of the most recent
// tokens stay in fp16 before their block is encoded.
struct LayerCodecs {
  std::unique_ptr<Codec> key;
  std::unique_ptr<Codec> value;
  size_t residual = 0;
};

struct MethodInfo {
  std::string name;     // spec name, e.g. "kivi"
  std::string family;   // docs folder, e.g. "scalar"
  std::string paper;    // citation, e.g. "Liu et al., ICML 2024, arXiv 2402.02750"
  std::string summary;  // one line
  std::vector<ParamDef> params;
  std::function<LayerCodecs(const Params&, const LayerShape&)> make;
};

const std::vector<MethodInfo>& registered_methods();
// Throws SpecError listing the registered names when `name` is unknown.
const MethodInfo& find_method(std::string_view name);

// A validated spec: the method and every parameter value.
struct Spec {
  const MethodInfo* method = nullptr;
  Params params;
  std::string to_string() const;  // canonical; parse_spec(s.to_string()) == s
  bool operator==(const Spec& o) const { return method == o.method && params == o.params; }
};
Spec parse_spec(std::string_view text);

}  // namespace veloxquant
