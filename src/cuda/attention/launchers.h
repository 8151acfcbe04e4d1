// What the split-decode attention kernels of every family share: how one is described, sized and
// launched, and the reduction after it. Each family's own kernels are declared in its folder
// (src/cuda/<family>/*_launch.h) and chosen by its device format (cache/device_format.h); each
// throws veloxquant::Error for a shape it has no kernel for, and every launch is checked.
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

// Merges the splits into out; undoes the value rotation when p.value_signs or p.value_matrix is set.
void launch_combine(const CombineParams& p, int batch, float hadamard_scale, cudaStream_t stream);

}  // namespace veloxquant::cuda
