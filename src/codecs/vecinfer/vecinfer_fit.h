// VecInfer's offline calibration of one KV head: the smoothing factors and the product-VQ
// codebooks, k-means in each sub-space of the transformed calibration keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace veloxquant::vecinfer {

struct FittedHead {
  std::vector<float> smooth;     // lambda per key channel, > 0
  std::vector<float> codebooks;  // [dim / dims][centroids][dims], each value rounded to fp16;
                                 // centroid 0 of every sub-space is the origin
};

// keys: `tokens` rows of `dim` floats, `stride` floats apart (one KV head of a [tokens, kv_heads,
// dim] array). Without `smooth` every lambda is 1 (the rotation alone). k-means++ seeding of sub-space s draws from derive_seed(seed, {s}).
// REQUIRES: tokens >= 1, dims divides dim, 1 <= centroids <= 256.
FittedHead fit_head(const float* keys, size_t tokens, size_t stride, size_t dim, size_t dims,
                    size_t centroids, bool smooth, uint64_t seed);

}  // namespace veloxquant::vecinfer
