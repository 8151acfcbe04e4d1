// The kernels of each method family, chosen and launched by the device cache
// (cache/device_cache.cu). Each throws veloxquant::Error for a shape it has no kernel for; every
// launch is checked.
#pragma once

#include <cuda_runtime.h>

#include "cuda/cache/layout.cuh"

namespace veloxquant::cuda {

// Largest query-head group per KV head the kernels are built for.
inline constexpr int kMaxGroup = 8;

// A split-decode attention kernel chosen for a shape: one block per (split, sequence x KV head),
// `smem` bytes of dynamic shared memory. The device cache picks it first, sizes the splits by how
// many of its blocks stay resident per multiprocessor, then launches it.
struct SplitKernel {
  void (*fn)(AttendParams) = nullptr;
  size_t smem = 0;
  const char* name = "";
};
// Blocks of k resident per multiprocessor (raises its shared-memory limit first).
int resident_blocks(const SplitKernel& k);
void launch_split_kernel(const SplitKernel& k, const AttendParams& p, int batch, cudaStream_t stream);

// The attention kernel of each family for p's head_dim, query group and (KIVI) key group.
SplitKernel fp16_split_kernel(const AttendParams& p);
SplitKernel kivi_split_kernel(const AttendParams& p, int bits);
// TurboQuant-MSE, or turboquant_prod when p.key_sketch is set (bits: its key bits, the sign's
// included, and its value bits).
SplitKernel turboquant_split_kernel(const AttendParams& p, int bits);

// QJL: p.kivi_group is the value group, p.qjl the keys' sketch and sizes; vbits 2 or 4.
SplitKernel qjl_split_kernel(const AttendParams& p, int vbits);

void launch_fp16_append(const AppendParams& p, int batch, cudaStream_t stream);
void launch_kivi_append(const AppendParams& p, int batch, int bits, int group, cudaStream_t stream);

struct TurboQuantDevice {  // device copies of TurboQuantTables
  const float* key_signs;
  const float* value_signs;
  const float* key_boundaries;
  const float* value_boundaries;
  const float* key_levels;  // turboquant_prod: the keys' (bits-1)-bit levels, for the residual
  const float* key_sketch;  // turboquant_prod: S transposed (S^T row-major); null for turboquant_mse
  float hadamard_scale;  // 1 / sqrt(head_dim), as the CPU's fwht computes it
};
// bits: the value bits, and the key bits (turboquant_prod's keys: bits - 1 code bits and a sign).
void launch_turboquant_append(const AppendParams& p, int batch, int bits, const TurboQuantDevice& t,
                              cudaStream_t stream);

struct QjlDevice {  // device copies of QjlTables and the sizes of QJL's key blocks
  const float* sketch_t;  // S^T: head_dim x proj, row-major
  int group, outliers, value_group;
};
// vbits: the value bits (2 or 4).
void launch_qjl_append(const AppendParams& p, int batch, int vbits, const QjlDevice& q, cudaStream_t stream);

// Merges the splits into out; undoes the value rotation when p.value_signs is set.
void launch_combine(const CombineParams& p, int batch, float hadamard_scale, cudaStream_t stream);

}  // namespace veloxquant::cuda
