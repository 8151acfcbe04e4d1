// The kernel launchers of each method family, called by the device cache (cache/device_cache.cu).
// Each throws veloxquant::Error for a shape it has no kernel for and checks its launch.
#pragma once

#include <cuda_runtime.h>

#include "cuda/cache/layout.cuh"

namespace veloxquant::cuda {

// Largest query-head group per KV head the kernels are built for.
inline constexpr int kMaxGroup = 8;

void launch_fp16_append(const AppendParams& p, int batch, cudaStream_t stream);
void launch_fp16_attend(const AttendParams& p, int batch, cudaStream_t stream);

void launch_kivi_append(const AppendParams& p, int batch, int bits, int group, cudaStream_t stream);
void launch_kivi_attend(const AttendParams& p, int batch, int bits, cudaStream_t stream);

struct TurboQuantDevice {  // device copies of TurboQuantTables
  const float* key_signs;
  const float* value_signs;
  const float* key_boundaries;
  const float* value_boundaries;
  float hadamard_scale;  // 1 / sqrt(head_dim), as the CPU's fwht computes it
};
void launch_turboquant_append(const AppendParams& p, int batch, int bits, const TurboQuantDevice& t,
                              cudaStream_t stream);
void launch_turboquant_attend(const AttendParams& p, int batch, int bits, cudaStream_t stream);

// Merges the splits into out; undoes the value rotation when p.value_signs is set.
void launch_combine(const CombineParams& p, int batch, float hadamard_scale, cudaStream_t stream);

}  // namespace veloxquant::cuda
