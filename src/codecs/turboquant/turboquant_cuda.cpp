#include "codecs/turboquant/turboquant_cuda.h"

#include "codecs/cuda_bits.h"
#include "codecs/turboquant/method.h"
#include "codecs/turboquant/turboquant_prod_codec.h"
#include "core/lloyd_max.h"
#include "core/rng.h"

namespace veloxquant::turboquant {
namespace {

// The random signs of a stream's Hadamard rotation, drawn as core/rotation.cpp draws them.
std::vector<float> rotation_signs(const LayerShape& shape, TurboQuantStream stream) {
  Rng rng(turboquant_stream_seed(shape, stream));
  std::vector<float> signs(shape.head_dim);
  for (float& s : signs) s = rng.sign();
  return signs;
}

}  // namespace

void cuda_config(bool prod, const Params& p, const LayerShape& shape, cuda::CacheConfig& c) {
  c.format = prod ? cuda::CacheFormat::TurboQuantProd : cuda::CacheFormat::TurboQuantMse;
  c.bits = cuda_equal_bits(prod ? "turboquant_prod" : "turboquant_mse", p, "bits", "vbits");
  // The kernels' codebooks come in 2 to 4 bits (cuda/cache/config_rules.h refuses others); no
  // table is solved for a width they would refuse.
  if (c.bits < 2 || c.bits > 4) return;
  const ScalarCodebook values = lloyd_max_sphere_coordinate(c.bits, shape.head_dim);
  const ScalarCodebook keys = prod ? TurboQuantProdCodec::mse_codebook(c.bits, shape.head_dim) : values;
  cuda::TurboQuantTables& t = c.turboquant;
  t.key_signs = rotation_signs(shape, TurboQuantStream::KeyRotation);
  t.value_signs = rotation_signs(shape, TurboQuantStream::ValueRotation);
  t.key_centroids = keys.centroids, t.value_centroids = values.centroids;
  t.key_boundaries = keys.boundaries, t.value_boundaries = values.boundaries;
  if (prod) {
    t.key_sketch = TurboQuantProdCodec::sketch_matrix(
        shape.head_dim, turboquant_stream_seed(shape, TurboQuantStream::KeySketch));
  }
}

}  // namespace veloxquant::turboquant
