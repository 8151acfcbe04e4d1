// device_cache_config(): the CUDA backend's configuration for a spec and a layer, with what the
// CPU codecs derive from the layer's seed (TurboQuant's rotation signs and codebooks, QJL's
// sketch), so that a DeviceCache stores byte for byte what KVCache(spec, shape) stores. It lives
// in the CPU library, which owns those derivations, and needs no CUDA toolkit.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "codecs/qjl/qjl_key_codec.h"
#include "core/lloyd_max.h"
#include "codecs/turboquant/method.h"
#include "codecs/turboquant/turboquant_prod_codec.h"
#include "core/rng.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace veloxquant::cuda {
namespace {

// The random signs of a stream's Hadamard rotation, drawn as core/rotation.cpp draws them.
std::vector<float> rotation_signs(const LayerShape& shape, TurboQuantStream stream) {
  Rng rng(turboquant_stream_seed(shape, stream));
  std::vector<float> signs(shape.head_dim);
  for (float& s : signs) s = rng.sign();
  return signs;
}

unsigned equal_bits(const Spec& spec, const char* key_param, const char* value_param) {
  const long k = spec.params.get_int(key_param), v = spec.params.get_int(value_param);
  if (k != v) {
    throw SpecError(fmt::format("{}: {}={} and {}={}; the CUDA backend stores keys and values with "
                                "one bit width: set them equal",
                                spec.method->name, key_param, k, value_param, v));
  }
  return static_cast<unsigned>(k);
}

}  // namespace

CacheConfig device_cache_config(std::string_view spec_text, const LayerShape& shape, size_t batch,
                                size_t capacity) {
  const Spec spec = parse_spec(spec_text);
  if (spec.eviction) {
    throw SpecError(fmt::format("'{}': the CUDA backend keeps every token; eviction policies ({}) "
                                "run on the CPU cache only",
                                spec_text, spec.eviction->name));
  }
  CacheConfig c;
  c.batch = batch;
  c.kv_heads = shape.kv_heads;
  c.head_dim = shape.head_dim;
  c.capacity = capacity;
  c.rope.dims = 0;  // keys arrive rotated, as KVCache::append(k, v) takes them
  const std::string& method = spec.method->name;
  if (method == "fp16") {
    c.format = CacheFormat::Fp16;
  } else if (method == "kivi") {
    c.format = CacheFormat::Kivi;
    c.bits = equal_bits(spec, "kbits", "vbits");
    c.group = static_cast<size_t>(spec.params.get_int("group"));
    c.residual = static_cast<size_t>(spec.params.get_int("residual"));
  } else if (method == "turboquant_mse" || method == "turboquant_prod") {
    const bool prod = method == "turboquant_prod";
    c.format = prod ? CacheFormat::TurboQuantProd : CacheFormat::TurboQuantMse;
    c.bits = equal_bits(spec, "bits", "vbits");
    const ScalarCodebook values = lloyd_max_sphere_coordinate(c.bits, shape.head_dim);
    const ScalarCodebook keys =
        prod ? turboquant::TurboQuantProdCodec::mse_codebook(c.bits, shape.head_dim) : values;
    TurboQuantTables& t = c.turboquant;
    t.key_signs = rotation_signs(shape, TurboQuantStream::KeyRotation);
    t.value_signs = rotation_signs(shape, TurboQuantStream::ValueRotation);
    t.key_centroids = keys.centroids, t.value_centroids = values.centroids;
    t.key_boundaries = keys.boundaries, t.value_boundaries = values.boundaries;
    if (prod) {
      t.key_sketch = turboquant::TurboQuantProdCodec::sketch_matrix(
          shape.head_dim, turboquant_stream_seed(shape, TurboQuantStream::KeySketch));
    }
  } else if (method == "qjl") {
    // The codecs make() builds settle the sizes (it caps them by head_dim); the key codec draws
    // its sketch from the layer's seed.
    c.format = CacheFormat::Qjl;
    const LayerCodecs codecs = spec.method->make(spec.params, shape);
    const QjlKeyConfig& k = dynamic_cast<const QjlKeyCodec&>(*codecs.key).config();
    c.bits = static_cast<unsigned>(std::stoul(spec.params.get_choice("vbits")));
    c.group = k.group;
    c.residual = codecs.residual;
    c.qjl.sketch = QjlKeyCodec::sketch_matrix(k.dim, k.proj, k.seed);
    c.qjl.proj = k.proj, c.qjl.outliers = k.outliers, c.qjl.outlier_proj = k.outlier_proj;
    c.qjl.value_group = std::min(static_cast<size_t>(spec.params.get_int("vgroup")), shape.head_dim);
  } else {
    throw SpecError(fmt::format("'{}': the CUDA backend runs fp16, kivi, turboquant_mse, "
                                "turboquant_prod and qjl; {} runs on the CPU cache",
                                spec_text, method));
  }
  return c;
}

}  // namespace veloxquant::cuda
