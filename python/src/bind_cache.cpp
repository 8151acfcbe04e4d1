// veloxquant.Cache: the compressed KV cache of one attention layer, on numpy arrays.
#include <fmt/format.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "arrays.h"
#include "bindings.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/session_file.h"

namespace nb = nanobind;

namespace veloxquant::python {
namespace {

AttendPath attend_path(const std::string& name) {
  if (name == "auto") return AttendPath::Auto;
  if (name == "fused") return AttendPath::Fused;
  if (name == "decoded") return AttendPath::Decoded;
  if (name == "reference") return AttendPath::Reference;
  throw Error(fmt::format("path='{}'; expected 'auto', 'fused', 'decoded' or 'reference'", name));
}

LayerShape layer_shape(size_t kv_heads, size_t head_dim, int layer, int layers, uint64_t seed) {
  return LayerShape{kv_heads, head_dim, layer, seed, layers};
}

FloatArray decoded(std::vector<float> x, const KVCache& cache) {
  const size_t stored = x.size() / (cache.kv_heads() * cache.head_dim());
  return float_array(std::move(x), {stored, cache.kv_heads(), cache.head_dim()});
}

}  // namespace

void bind_cache(nb::module_& m) {
  m.def("save_caches",
        [](const std::vector<const KVCache*>& caches, const std::string& path) { save_caches(caches, path); },
        nb::arg("caches"), nb::arg("path"),
        "Saves the caches of a model's layers, as Cache.for_layers built them (or one Cache), to "
        "path; load_caches reads them back.");
  m.def("load_caches", [](const std::string& path) { return load_caches(path); }, nb::arg("path"),
        "The caches saved at path (save_caches or Cache.save), a list with one per layer.");
  nb::class_<KVCache>(m, "Cache",
                      "The compressed KV cache of one attention layer: append keys and values, "
                      "attend for queries (grouped-query, causal), exact stored bytes.")
      .def("__init__",
           [](KVCache* self, const std::string& spec, size_t kv_heads, size_t head_dim, int layer,
              int layers, uint64_t seed) {
             new (self) KVCache(spec, layer_shape(kv_heads, head_dim, layer, layers, seed));
           },
           nb::arg("spec"), nb::kw_only(), nb::arg("kv_heads"), nb::arg("head_dim"),
           nb::arg("layer") = 0, nb::arg("layers") = 1, nb::arg("seed") = 0,
           "One layer alone (a cross-layer spec stores it with its base quantizer; see "
           "for_layers). layer and seed are mixed into the codecs' random choices. Raises "
           "SpecError naming the parameter when the spec is invalid.")
      .def_static("for_layers",
                  [](const std::string& spec, int layers, size_t kv_heads, size_t head_dim, uint64_t seed) {
                    return make_layer_caches(parse_spec(spec),
                                             layer_shape(kv_heads, head_dim, 0, layers, seed), layers);
                  },
                  nb::arg("spec"), nb::kw_only(), nb::arg("layers"), nb::arg("kv_heads"),
                  nb::arg("head_dim"), nb::arg("seed") = 0,
                  "The caches of a model's layers, as the runtime builds them: cross-layer specs "
                  "(minicache, xquant) store adjacent layers in pairs.")
      .def("append",
           [](KVCache& c, const InArray& k, const InArray& v) {
             c.append(view_of(k, "k", 3, true), view_of(v, "v", 3, true));
           },
           nb::arg("k"), nb::arg("v"),
           "Appends keys and values, [tokens, kv_heads, head_dim] float32 or float16, finite and "
           "|x| <= 65504. Keys are taken as they are (no RoPE applied).")
      .def("attend",
           [](KVCache& c, const InArray& q, const std::string& path, bool observe) {
             const TensorView view = view_of(q, "q", 3, true);
             std::vector<float> out(view.numel());
             if (observe) {
               if (path != "auto") throw Error("observe=True attends on the default path; got path='" + path + "'");
               c.attend_observed(view, out.data());
             } else {
               c.attend(view, out.data(), attend_path(path));
             }
             return float_array(std::move(out), {view.dim(0), view.dim(1), view.dim(2)});
           },
           nb::arg("q"), nb::arg("path") = "auto", nb::arg("observe") = false,
           "Attention output [nq, q_heads, head_dim] float32 for queries q of the same shape "
           "(q_heads a multiple of kv_heads). Query i belongs to the last nq cached tokens and "
           "sees tokens [0, tokens - nq + i]. Scale 1/sqrt(head_dim). path: 'auto', 'fused' "
           "(from the codes), 'decoded' or 'reference'. observe=True hands an eviction policy the "
           "attention each stored token received, as the runtime does (then call finish_step).")
      .def("finish_step", &KVCache::finish_step,
           "Ends a step: encodes blocks held back for the step's attention (zipcache, "
           "cross-layer pairs), then evicts down to the budget when the spec has a policy.")
      .def("decode_keys", [](const KVCache& c) { return decoded(c.decode_keys(), c); },
           "Reconstruction of the stored keys, [stored, kv_heads, head_dim] float32.")
      .def("decode_values", [](const KVCache& c) { return decoded(c.decode_values(), c); },
           "Reconstruction of the stored values, [stored, kv_heads, head_dim] float32.")
      .def("stored_tokens", &KVCache::stored_tokens, nb::arg("head"),
           "Tokens KV head `head` holds now (fewer than tokens once a policy evicts).")
      .def_prop_ro("spec", [](const KVCache& c) { return c.spec().to_string(); }, "the canonical spec")
      .def_prop_ro("tokens", &KVCache::tokens, "tokens appended so far, evicted ones included")
      .def_prop_ro("kv_heads", &KVCache::kv_heads)
      .def_prop_ro("head_dim", &KVCache::head_dim)
      .def_prop_ro("nbytes", &KVCache::bytes,
                   "exact stored bytes: codes, fp16 residual tokens, sinks and fitted state")
      .def_prop_ro("key_nbytes", &KVCache::key_bytes)
      .def_prop_ro("value_nbytes", &KVCache::value_bytes)
      .def_prop_ro("fp16_nbytes", &KVCache::fp16_bytes, "what an fp16 cache would store")
      .def("save", [](const KVCache& c, const std::string& path) {
             const KVCache* one = &c;
             save_caches(std::span<const KVCache* const>(&one, 1), path);
           },
           nb::arg("path"),
           "Saves this cache to path (written to a temporary file, then renamed over path): spec, "
           "shape, seed and every stored byte. A layer of a cross-layer group (for_layers) is saved "
           "with its group: veloxquant.save_caches. Raises Error when the spec evicts.")
      .def_static("load", [](const std::string& path) {
             std::vector<KVCache> caches = load_caches(path);
             if (caches.size() != 1) {
               throw Error(fmt::format("cache file '{}' holds {} layers; load it with veloxquant.load_caches",
                                       path, caches.size()));
             }
             return std::move(caches.front());
           },
           nb::arg("path"),
           "The cache saved at path, byte for byte. Raises Error naming the file and the first "
           "field that is truncated, corrupt or inconsistent.")
      .def("__repr__", [](const KVCache& c) {
        return fmt::format("<Cache {} tokens={} nbytes={}>", c.spec().to_string(), c.tokens(), c.bytes());
      });
}

}  // namespace veloxquant::python
