// VecInfer's form on the CUDA backend (MethodInfo::cuda_config).
#pragma once

#include <string>
#include <vector>

#include "codecs/vecinfer/vecinfer_key_codec.h"
#include "veloxquant/cuda.h"
#include "veloxquant/method.h"

namespace veloxquant::vecinfer {

// Fills c with the format, the value bits and the tables the CPU codecs code with: the key
// rotation, every KV head's smoothing factors and codebooks (`heads`, one per KV head), and
// turboquant_mse's value tables at `vbits`; returns what the kernels do not run. With no heads
// (no calibration at hand) only the settings are checked and c gets no tables.
std::string cuda_config(size_t dims, size_t centroids, unsigned vbits, const std::vector<HeadTables>& heads,
                        const LayerShape& shape, cuda::CacheConfig& c);

}  // namespace veloxquant::vecinfer
