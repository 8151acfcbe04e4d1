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

// The values' side of t as turboquant_values() (codecs/common/turboquant_values.h) codes them at
// `bits`: the Lloyd-Max levels and boundaries and the layer's value rotation. The methods that
// pair their keys with TurboQuant's values fill their GPU form's value tables with it.
void fill_value_tables(unsigned bits, const LayerShape& shape, cuda::TurboQuantTables& t);

}  // namespace veloxquant::turboquant
