// What the TurboQuant family shares with the methods that pair their own keys with its values
// (rabitq, spectral, vecinfer, comm_vq): the seeds of a layer's random streams and the values'
// codec.
#pragma once

#include <cstdint>
#include <memory>

#include "veloxquant/codec.h"
#include "veloxquant/method.h"

namespace veloxquant {

// The seed of one of a layer's random streams: keys and values get independent rotations (and
// sketches), mixing the layer index with a per-stream tag. The CUDA backend's configuration
// (cache/device_config.cpp) derives the same rotations from it.
enum class TurboQuantStream : uint64_t { KeyRotation = 1, ValueRotation = 2, KeySketch = 3 };
uint64_t turboquant_stream_seed(const LayerShape& shape, TurboQuantStream stream);
// The values of the TurboQuant methods and of those that pair their own keys with them (rabitq,
// spectral, vecinfer, comm_vq): turboquant_mse at the spec's `vbits` with the layer's value rotation.
std::unique_ptr<Codec> turboquant_values(const Params& p, const LayerShape& s);

}  // namespace veloxquant
