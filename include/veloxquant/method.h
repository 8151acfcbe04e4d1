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
#include "veloxquant/pair_codec.h"
#include "veloxquant/rope.h"
#include "veloxquant/spec.h"

namespace veloxquant {

namespace cuda {
struct CacheConfig;  // veloxquant/cuda.h
}
class EvictionPolicy;  // src/cache/eviction/policy.h
struct CalibrationArtifact;  // veloxquant/calibration.h
struct CalibrationSamples;
struct LayerCalibration;
struct Spec;

// What a method needs to know about the layer it compresses.
struct LayerShape {
  size_t kv_heads = 1;
  size_t head_dim = 128;
  int layer = 0;       // mixed into random choices so layers get independent rotations
  uint64_t seed = 0;   // same seed, same bytes
  int layers = 1;      // layers of the model (eviction budgets that vary with depth)
  // A calibrated method's fitted parameters for every layer (veloxquant/calibration.h); null
  // until loaded from the spec's artifacts= directory or handed in by the caller.
  std::shared_ptr<const CalibrationArtifact> calibration = nullptr;
  // The model's RoPE, for a method whose keys are stored before it (MethodInfo::keys_before_rope):
  // what a cache rotates its keys with until an append hands it the RoPE itself, so that a cache
  // restored from a session file decodes its keys rotated. dims 0 (no rotation) without a model.
  RopeParams rope = {};
  // The layer's attention beyond causal softmax, as its model defines it (Gemma's): a query at
  // position p sees only the keys at positions > p - window (0: every key), and each score s
  // becomes softcap * tanh(s / softcap) before the softmax (0: unchanged). A window also bounds
  // what the cache keeps: the encoded blocks no later query can see are dropped.
  size_t window = 0;
  float softcap = 0.0f;
};

// The codecs of one layer: one for keys, one for values, and how many of the most recent
// tokens stay in fp16 before their block is encoded.
struct LayerCodecs {
  std::unique_ptr<Codec> key;
  std::unique_ptr<Codec> value;
  size_t residual = 0;
  // Mixed precision across KV heads (ratequant): when set, one key and one value codec per KV
  // head, which the cache stores head h with (heads at the same precision share one). key and
  // value are then head 0's, and what every head's codec has in common is read from them: dim,
  // block_tokens, variable_length, fits_streams (false), wants_attention (false).
  std::vector<std::shared_ptr<const Codec>> head_keys, head_values;
};

struct MethodInfo {
  std::string name;     // spec name, e.g. "kivi"
  std::string family;   // docs folder, e.g. "scalar"
  std::string paper;    // citation, e.g. "Liu et al., ICML 2024, arXiv 2402.02750"
  std::string summary;  // one line
  std::vector<ParamDef> params;
  // Quantizers build the codecs of a layer; eviction policies (the token-eviction methods) build
  // the policy that chooses which tokens a layer keeps. Exactly one of the two is set.
  std::function<LayerCodecs(const Params&, const LayerShape&)> make;
  std::function<std::unique_ptr<EvictionPolicy>(const Params&, const LayerShape&)> make_policy;
  // Cross-layer methods (minicache, xquant) set these two as well: the first layer of every pair
  // (each paired with the next layer) in a model of `layers` layers, and the codecs a pair stores
  // its encoded blocks with. make() gives the codecs of the layers outside pairs, and of a cache
  // built alone (KVCache's constructor): the method's base quantizer. make_layer_caches()
  // (veloxquant/cache.h) builds a model's caches with their pairs.
  std::function<std::vector<int>(const Params&, int layers)> pair_leaders = {};
  std::function<PairCodecs(const Params&, const LayerShape&)> make_pair = {};
  bool cross_layer() const { return static_cast<bool>(make_pair); }
  // Calibrated methods (kvquant_nuq) set fit: it turns one layer's calibration samples into the
  // tables its make() reads back with layer_calibration() (veloxquant/calibration.h). make()
  // without them throws an Error that says how to calibrate.
  std::function<LayerCalibration(const Params&, const CalibrationSamples&)> fit = {};
  bool calibrated() const { return static_cast<bool>(fit); }
  // Optional, for calibrated methods: one line on what the calibration in shape.calibration decided
  // for the whole model (ratequant: each layer's bit widths), which `veloxquant calibrate` prints.
  std::function<std::string(const Params&, const LayerShape&)> describe_calibration = {};
  // Methods whose key codecs take keys BEFORE RoPE (comm_vq: codebooks that commute with RoPE's
  // rotations serve every position). KVCache then stores keys unrotated, rotates them to their
  // positions when it attends or decodes them (so every reader sees keys after RoPE, as with
  // other methods), and calibration hands fit() pre-RoPE keys.
  bool keys_before_rope = false;
  // Wrappers (ratequant) store tokens with another quantizer, the inner one, written after them:
  // "ratequant:avg=2.5+kivi:group=32", or the wrapper alone for default_inner. check_inner throws
  // SpecError saying why an inner spec cannot be wrapped. parse_spec keeps the inner's canonical
  // spec in the wrapper's params as the text "inner", which Spec::to_string writes after '+'.
  std::function<void(const Spec& inner)> check_inner = {};
  std::string default_inner = {};
  bool wrapper() const { return static_cast<bool>(check_inner); }
  // The method's form on the CUDA backend, beside its CPU codecs (src/codecs/<family>/): fills the
  // format, bit widths and seed-derived tables of one layer's cuda::CacheConfig, whose shape,
  // batch and capacity the caller set, so that the GPU stores the CPU codecs' bytes, and returns
  // what its format's kernels do not run in it (its family's rules, src/cuda/<family>/*_rules.h;
  // empty: they run it). Throws SpecError naming a parameter value the GPU form lacks. Unset: the
  // method runs on the CPU only. cuda::supports() (veloxquant/cuda.h) asks it.
  std::function<std::string(const Params&, const LayerShape&, cuda::CacheConfig&)> cuda_config = {};
  // How the GPU's decode attention reads the cache, as `veloxquant methods` says it.
  std::string cuda_attention = "on the codes";
};

// The quantizers (how tokens are stored) and the eviction policies (which tokens are kept).
const std::vector<MethodInfo>& registered_methods();
const std::vector<MethodInfo>& registered_policies();
// One line per parameter: "    name  default (range)  help", names aligned. The help text of
// `veloxquant methods` and of the Python package's docstrings.
std::string describe_params(const MethodInfo& method);
// Throw SpecError listing the registered names when `name` is unknown.
const MethodInfo& find_method(std::string_view name);
const MethodInfo& find_policy(std::string_view name);

// A validated spec: an optional eviction policy, the quantizer that stores the tokens kept, and
// every parameter value. Text: "quantizer:..." or "policy:...+quantizer:..."; a policy alone
// stores its tokens in fp16. The quantizer may be a wrapper followed by its inner quantizer:
// "ratequant:avg=2.5+kivi" or "snapkv:budget=1024+ratequant:avg=3+turboquant_mse".
struct Spec {
  const MethodInfo* method = nullptr;  // the quantizer
  Params params;
  const MethodInfo* eviction = nullptr;  // null: every token is kept
  Params eviction_params;
  std::string to_string() const;  // canonical; parse_spec(s.to_string()) == s
  bool operator==(const Spec& o) const {
    return method == o.method && params == o.params && eviction == o.eviction &&
           eviction_params == o.eviction_params;
  }
};
Spec parse_spec(std::string_view text);

}  // namespace veloxquant
