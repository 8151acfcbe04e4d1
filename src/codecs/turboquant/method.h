// The TurboQuant family (Zandieh et al., arXiv 2504.19874): turboquant_mse, turboquant_prod and
// turboquant_rvq. See docs/methods/turboquant.md.
#pragma once

#include <cstdint>

#include "veloxquant/method.h"

namespace veloxquant {
MethodInfo turboquant_mse_method();
// The seed of one of a layer's random streams: keys and values get independent rotations (and
// sketches), mixing the layer index with a per-stream tag. The CUDA backend's configuration
// (cache/device_config.cpp) derives the same rotations from it.
enum class TurboQuantStream : uint64_t { KeyRotation = 1, ValueRotation = 2, KeySketch = 3 };
uint64_t turboquant_stream_seed(const LayerShape& shape, TurboQuantStream stream);
MethodInfo turboquant_prod_method();
MethodInfo turboquant_rvq_method();
}  // namespace veloxquant
