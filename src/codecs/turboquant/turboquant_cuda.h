// The TurboQuant family's form on the CUDA backend (MethodInfo::cuda_config).
#pragma once

#include <string>

#include "cuda/turboquant/turboquant_rules.h"
#include "veloxquant/cuda.h"
#include "veloxquant/method.h"

namespace veloxquant::turboquant {

// The rotations, codebooks (turboquant_rvq: its two stages and their joint table) and
// turboquant_prod's key sketch that the CPU codecs draw from the layer's seed, so that the GPU
// stores their codes; returns what the kernels do not run.
std::string cuda_config(cuda::TurboQuantKind kind, const Params& p, const LayerShape& shape,
                        cuda::CacheConfig& c);

}  // namespace veloxquant::turboquant
