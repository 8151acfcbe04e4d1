// VecInfer's kernels (vecinfer_format.cu): keys as product-VQ indices of y = R (k / lambda), per
// KV head tables; values are TurboQuant's (turboquant_launch.h appends them).
#pragma once

#include <cuda_runtime.h>

#include "cuda/attention/launchers.h"

namespace veloxquant::cuda {

struct VecinferDevice {       // device copies of VecinferTables' key side
  const float* key_signs;     // Hadamard signs, or null where the rotation is dense:
  const float* key_rotation;  // row-major head_dim x head_dim; null for a Hadamard rotation
  const float* smooth;        // [kv_heads][head_dim]
  const float* codebooks;     // [kv_heads][subspaces][centroids][dims]
  float hadamard_scale;       // 1 / sqrt(head_dim), as the CPU's fwht computes it
  int subspaces, centroids;
};

struct VecinferArgs {  // AttendParams::format of the attention kernel
  VecinferDevice keys;
  const float* value_codebook;
};

// Codes the keys of p.n tokens per stream (keys rotated by RoPE first when p.rope_half > 0).
void launch_vecinfer_key_append(const AppendParams& p, int batch, const VecinferDevice& t,
                                cudaStream_t stream);

// bits: the value bits; p.format: VecinferArgs.
SplitKernel vecinfer_split_kernel(const AttendParams& p, int bits);

}  // namespace veloxquant::cuda
