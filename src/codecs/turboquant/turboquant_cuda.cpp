#include "codecs/turboquant/turboquant_cuda.h"

#include <memory>

#include "codecs/common/turboquant_values.h"
#include "codecs/cuda_bits.h"
#include "codecs/turboquant/turboquant_prod_codec.h"
#include "core/lloyd_max.h"
#include "core/rng.h"
#include "cuda/turboquant/turboquant_rules.h"

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

std::string cuda_config(bool prod, const Params& p, const LayerShape& shape, cuda::CacheConfig& c) {
  c.format = prod ? "turboquant_prod" : "turboquant_mse";
  c.bits = cuda_equal_bits(c.format, p, "bits", "vbits");
  // No table is solved for a width the kernels would refuse.
  if (!cuda::turboquant_bits_supported(c.bits)) return cuda::turboquant_problem(c, prod);
  if (std::string problem = cuda::hadamard_head_dim_problem(c.format, c); !problem.empty()) return problem;
  const ScalarCodebook values = lloyd_max_sphere_coordinate(c.bits, shape.head_dim);
  const ScalarCodebook keys = prod ? TurboQuantProdCodec::mse_codebook(c.bits, shape.head_dim) : values;
  auto t = std::make_shared<cuda::TurboQuantTables>();
  t->key_signs = rotation_signs(shape, TurboQuantStream::KeyRotation);
  t->value_signs = rotation_signs(shape, TurboQuantStream::ValueRotation);
  t->key_centroids = keys.centroids, t->value_centroids = values.centroids;
  t->key_boundaries = keys.boundaries, t->value_boundaries = values.boundaries;
  if (prod) {
    t->key_sketch = TurboQuantProdCodec::sketch_matrix(
        shape.head_dim, turboquant_stream_seed(shape, TurboQuantStream::KeySketch));
  }
  c.tables = std::move(t);
  return cuda::turboquant_problem(c, prod);
}

}  // namespace veloxquant::turboquant
