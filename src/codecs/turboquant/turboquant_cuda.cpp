#include "codecs/turboquant/turboquant_cuda.h"

#include <memory>

#include "codecs/common/turboquant_values.h"
#include "codecs/cuda_bits.h"
#include "codecs/turboquant/turboquant_prod_codec.h"
#include "core/lloyd_max.h"
#include "core/rotation.h"
#include "cuda/turboquant/turboquant_rules.h"

namespace veloxquant::turboquant {

std::string cuda_config(bool prod, const Params& p, const LayerShape& shape, cuda::CacheConfig& c) {
  c.format = prod ? "turboquant_prod" : "turboquant_mse";
  c.bits = cuda_equal_bits(c.format, p, "bits", "vbits");
  // No table is solved for a shape the kernels would refuse.
  if (std::string problem = cuda::turboquant_shape_problem(c, prod); !problem.empty()) return problem;
  const ScalarCodebook values = lloyd_max_sphere_coordinate(c.bits, shape.head_dim);
  const ScalarCodebook keys = prod ? TurboQuantProdCodec::mse_codebook(c.bits, shape.head_dim) : values;
  auto t = std::make_shared<cuda::TurboQuantTables>();
  // The codecs' own rotations (core/rotation.h draws them once per seed and size).
  const Rotation key_rotation(shape.head_dim, turboquant_stream_seed(shape, TurboQuantStream::KeyRotation));
  const Rotation value_rotation(shape.head_dim,
                                turboquant_stream_seed(shape, TurboQuantStream::ValueRotation));
  t->key_signs = key_rotation.signs(), t->value_signs = value_rotation.signs();
  t->key_rotation = key_rotation.matrix(), t->value_rotation = value_rotation.matrix();
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
