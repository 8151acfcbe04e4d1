// Non-uniform quantization levels (KVQuant's NUQ datatype): 1-D k-means over calibration samples,
// each sample weighted by its sensitivity, so levels sit where the weighted mass is rather than on
// a uniform grid.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace veloxquant {

// `levels` ascending centroids of weighted k-means (Lloyd's iterations to convergence, started
// from the weighted quantiles) on the samples u[i] with weights w[i] >= 0. Levels no sample falls
// nearest to keep their starting place. REQUIRES: u.size() == w.size() >= 1, 1 <= levels <= 256,
// positive total weight.
std::vector<float> weighted_kmeans_1d(std::span<const float> u, std::span<const float> w, size_t levels);

// Index of the level nearest to x (ties to the lower level). REQUIRES: levels ascending, non-empty.
uint8_t nearest_level(std::span<const float> levels, float x);

}  // namespace veloxquant
