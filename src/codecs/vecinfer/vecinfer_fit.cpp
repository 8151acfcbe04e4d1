#include "codecs/vecinfer/vecinfer_fit.h"

#include "codecs/vecinfer/key_transform.h"
#include "core/kmeans.h"
#include "core/rng.h"
#include "veloxquant/tensor.h"

namespace veloxquant::vecinfer {

FittedHead fit_head(const float* keys, size_t tokens, size_t stride, size_t dim, size_t dims,
                    size_t centroids, bool smooth, uint64_t seed) {
  FittedHead f;
  f.smooth = smooth ? smoothing_factors(keys, tokens, stride, dim) : std::vector<float>(dim, 1.0f);
  std::vector<float> y(tokens * dim);
  for (size_t t = 0; t < tokens; ++t)
    for (size_t c = 0; c < dim; ++c) y[t * dim + c] = keys[t * stride + c];
  transform_keys(key_rotation(dim), f.smooth, y.data(), tokens);
  // Each sub-space is its own k-means problem: the dims coordinates s*dims .. of every key. The
  // same Lloyd k-means (k-means++ seeding) as rabitq's IVF.
  const size_t subspaces = dim / dims;
  f.codebooks.reserve(subspaces * centroids * dims);
  for (size_t s = 0; s < subspaces; ++s) {
    // Centroid 0 is the origin, so that a zero key (an empty head, padding) is coded, decoded and
    // scored as exactly zero; k-means places the other centroids - 1.
    f.codebooks.insert(f.codebooks.end(), dims, 0.0f);
    if (centroids == 1) continue;
    const std::vector<float> c = kmeans(y.data() + s * dims, tokens, dim, dims, centroids - 1,
                                        derive_seed(seed, {static_cast<uint64_t>(s)}));
    // The codec stores its codebooks in fp16: round here so the artifact holds what is used.
    for (float v : c) f.codebooks.push_back(f16_to_f32(f32_to_f16(v)));
  }
  return f;
}

}  // namespace veloxquant::vecinfer
