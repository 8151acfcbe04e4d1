// TurboQuant's kernels (turboquant_format.cu): rotated Lloyd-Max codes (a Hadamard rotation with
// random signs where head_dim is a power of two, a dense orthogonal matrix at 80 and 96),
// turboquant_prod's sign bits of the keys' sketched residual, and turboquant_rvq's codes holding
// both stages' indices into one joint table.
#pragma once

#include <cuda_runtime.h>

#include "cuda/attention/launchers.h"

namespace veloxquant::cuda {

struct TurboQuantArgs {  // AttendParams::format of the TurboQuant kernels
  const float* key_codebook = nullptr;  // levels
  const float* value_codebook = nullptr;
  const float* key_signs = nullptr;     // the key rotation: Hadamard signs, or
  const float* key_rotation = nullptr;  // its dense matrix (row-major) where head_dim is not a power of two
  const float* key_sketch = nullptr;    // turboquant_prod: S transposed (S^T row-major); else null
};

// TurboQuant-MSE, or turboquant_prod when prod (bits: its key bits, the sign's included, and its
// value bits); p.format: TurboQuantArgs.
SplitKernel turboquant_split_kernel(const AttendParams& p, int bits, bool prod);

struct TurboQuantDevice {  // device copies of TurboQuantTables
  const float* key_signs;  // Hadamard signs, or null where the rotations are dense:
  const float* value_signs;
  const float* key_rotation;  // row-major head_dim x head_dim; null for Hadamard rotations
  const float* value_rotation;
  const float* key_boundaries;
  const float* value_boundaries;
  const float* key_levels;  // turboquant_prod: the keys' (bits-1)-bit levels, for the residual
  const float* key_sketch;  // turboquant_prod: S transposed (S^T row-major); null otherwise
  float hadamard_scale;  // 1 / sqrt(head_dim), as the CPU's fwht computes it
  // turboquant_rvq: its stages' tables (TurboQuantTables); null stage1_levels for the others.
  const float* stage1_levels = nullptr;
  const float* stage1_boundaries = nullptr;
  const float* stage2_boundaries = nullptr;
  float stage_scale = 0;
};
// bits: the value bits, and the key bits (turboquant_prod's keys: bits - 1 code bits and a sign;
// turboquant_rvq: both stages' bits). values_only: the values alone, for the methods that pair
// their own keys with TurboQuant's values (VecInfer); t's key tables may then be null.
void launch_turboquant_append(const AppendParams& p, int batch, int bits, const TurboQuantDevice& t,
                              cudaStream_t stream, bool values_only = false);

}  // namespace veloxquant::cuda
