// turboquant_mse's and turboquant_prod's form on the CUDA backend (MethodInfo::cuda_config).
#pragma once

#include <string>

#include "veloxquant/cuda.h"
#include "veloxquant/method.h"

namespace veloxquant::turboquant {

// The rotation signs, Lloyd-Max codebooks and (prod) key sketch that the CPU codecs draw from the
// layer's seed, so that the GPU stores their codes; returns what the kernels do not run.
std::string cuda_config(bool prod, const Params& p, const LayerShape& shape, cuda::CacheConfig& c);

}  // namespace veloxquant::turboquant
