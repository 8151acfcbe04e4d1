#include "codecs/vecinfer/vecinfer_cuda.h"

#include <memory>

#include "codecs/turboquant/turboquant_cuda.h"
#include "codecs/vecinfer/key_transform.h"
#include "cuda/vecinfer/vecinfer_rules.h"

namespace veloxquant::vecinfer {

std::string cuda_config(size_t dims, size_t centroids, unsigned vbits, const std::vector<HeadTables>& heads,
                        const LayerShape& shape, cuda::CacheConfig& c) {
  c.format = "vecinfer";
  c.bits = vbits;
  if (std::string problem = cuda::vecinfer_shape_problem(c, dims, centroids); !problem.empty())
    return problem;
  if (heads.empty()) return {};
  auto t = std::make_shared<cuda::VecinferTables>();
  t->dims = dims, t->centroids = centroids;
  const Rotation rotation = key_rotation(shape.head_dim);
  t->key_signs = rotation.signs(), t->key_rotation = rotation.matrix();
  for (const HeadTables& h : heads) {
    t->smooth.insert(t->smooth.end(), h.smooth.begin(), h.smooth.end());
    t->codebooks.insert(t->codebooks.end(), h.codebooks.begin(), h.codebooks.end());
  }
  turboquant::fill_value_tables(vbits, shape, t->values);
  c.tables = std::move(t);
  return cuda::vecinfer_problem(c);
}

}  // namespace veloxquant::vecinfer
