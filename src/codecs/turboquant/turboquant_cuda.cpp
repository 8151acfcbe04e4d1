#include "codecs/turboquant/turboquant_cuda.h"

#include <cmath>
#include <memory>

#include "codecs/common/turboquant_values.h"
#include "codecs/cuda_bits.h"
#include "codecs/turboquant/turboquant_prod_codec.h"
#include "codecs/turboquant/turboquant_rvq_codec.h"
#include "core/lloyd_max.h"
#include "core/rotation.h"

namespace veloxquant::turboquant {
namespace {

const char* format_name(cuda::TurboQuantKind kind) {
  switch (kind) {
    case cuda::TurboQuantKind::Prod: return "turboquant_prod";
    case cuda::TurboQuantKind::Rvq: return "turboquant_rvq";
    case cuda::TurboQuantKind::Mse: break;
  }
  return "turboquant_mse";
}

// turboquant_rvq's codebooks, as TurboQuantRvqCodec solves them for `stage_bits` per stage.
void set_stages(unsigned stage_bits, size_t head_dim, cuda::TurboQuantTables& t) {
  const ResidualStages stages = gaussian_residual_stages(stage_bits);
  t.key_centroids = t.value_centroids = residual_joint_table(stages, stage_bits,
                                                             1.0 / std::sqrt(static_cast<double>(head_dim)));
  t.stage1_levels = stages.gaussian.centroids;
  t.stage1_boundaries = stages.gaussian.boundaries;
  t.stage2_boundaries = stages.laplacian.boundaries;
  t.stage_scale = TurboQuantRvqCodec::stage_scale(head_dim);
  t.value_boundaries.clear();  // the stages' boundaries code it
}

}  // namespace

void fill_value_tables(unsigned bits, const LayerShape& shape, cuda::TurboQuantTables& t) {
  const ScalarCodebook values = lloyd_max_sphere_coordinate(bits, shape.head_dim);
  t.value_centroids = values.centroids, t.value_boundaries = values.boundaries;
  const Rotation rotation(shape.head_dim, turboquant_stream_seed(shape, TurboQuantStream::ValueRotation));
  t.value_signs = rotation.signs(), t.value_rotation = rotation.matrix();
}

std::string cuda_config(cuda::TurboQuantKind kind, const Params& p, const LayerShape& shape,
                        cuda::CacheConfig& c) {
  const bool prod = kind == cuda::TurboQuantKind::Prod;
  c.format = format_name(kind);
  const unsigned bits = cuda_equal_bits(c.format, p, "bits", "vbits");
  // turboquant_rvq's codes hold both stages' indices.
  c.bits = kind == cuda::TurboQuantKind::Rvq ? 2 * bits : bits;
  // No table is solved for a shape the kernels would refuse.
  if (std::string problem = cuda::turboquant_shape_problem(c, kind); !problem.empty()) return problem;
  auto t = std::make_shared<cuda::TurboQuantTables>();
  fill_value_tables(c.bits, shape, *t);
  if (kind == cuda::TurboQuantKind::Rvq) {
    set_stages(bits, shape.head_dim, *t);
  } else {
    const ScalarCodebook keys = prod ? TurboQuantProdCodec::mse_codebook(c.bits, shape.head_dim)
                                     : lloyd_max_sphere_coordinate(c.bits, shape.head_dim);
    t->key_centroids = keys.centroids, t->key_boundaries = keys.boundaries;
  }
  // The key codec's own rotation (core/rotation.h draws it once per seed and size).
  const Rotation key_rotation(shape.head_dim, turboquant_stream_seed(shape, TurboQuantStream::KeyRotation));
  t->key_signs = key_rotation.signs(), t->key_rotation = key_rotation.matrix();
  if (prod) {
    t->key_sketch = TurboQuantProdCodec::sketch_matrix(
        shape.head_dim, turboquant_stream_seed(shape, TurboQuantStream::KeySketch));
  }
  c.tables = std::move(t);
  return cuda::turboquant_problem(c, kind);
}

}  // namespace veloxquant::turboquant
