// Occupancy and launch of the split-decode attention kernels (launchers.h).
#include "cuda/attention/launchers.h"
#include "cuda/attention/split_decode.cuh"
#include "cuda/common/check.cuh"

namespace veloxquant::cuda {
namespace {

// Past the default 48 KB a kernel must ask for its dynamic shared memory.
void allow_shared_memory(const SplitKernel& k) {
  VQ_CUDA_CHECK(cudaFuncSetAttribute(k.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(k.smem)));
}

}  // namespace

int resident_blocks(const SplitKernel& k) {
  allow_shared_memory(k);
  int blocks = 0;
  VQ_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.fn, kThreads, k.smem));
  return blocks;
}

void launch_split_kernel(const SplitKernel& k, const AttendParams& p, int batch, cudaStream_t stream) {
  allow_shared_memory(k);
  k.fn<<<dim3(p.splits, batch * p.kv_heads, p.queries), kThreads, k.smem, stream>>>(p);
  check_cuda(cudaGetLastError(), k.name, __FILE__, __LINE__);
}

}  // namespace veloxquant::cuda
