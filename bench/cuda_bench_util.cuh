// What the CUDA benchmarks share: an owning device buffer and the median timing of launches.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "cuda/common/check.cuh"

namespace veloxquant::cuda::bench {

// H200's L2 (60 MB) rounded up: inputs rotate over enough copies to pass three times this, so
// timed launches read them from HBM.
inline constexpr size_t kL2Bytes = size_t{60} << 20;

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  explicit DeviceBuffer(size_t n) { VQ_CUDA_CHECK(cudaMalloc(&ptr, n * sizeof(T))); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Median of `iters` timed calls of f(i) after `warmup` untimed ones, in microseconds, each call
// timed alone with CUDA events.
template <class F>
double median_us(int warmup, int iters, F&& f) {
  cudaEvent_t a, b;
  VQ_CUDA_CHECK(cudaEventCreate(&a));
  VQ_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) f(i);
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) {
    VQ_CUDA_CHECK(cudaEventRecord(a));
    f(warmup + i);
    VQ_CUDA_CHECK(cudaEventRecord(b));
    VQ_CUDA_CHECK(cudaEventSynchronize(b));
    VQ_CUDA_CHECK(cudaEventElapsedTime(&ms[i], a, b));
  }
  VQ_CUDA_CHECK(cudaEventDestroy(a));
  VQ_CUDA_CHECK(cudaEventDestroy(b));
  std::nth_element(ms.begin(), ms.begin() + iters / 2, ms.end());
  return ms[iters / 2] * 1000.0;
}

}  // namespace veloxquant::cuda::bench
