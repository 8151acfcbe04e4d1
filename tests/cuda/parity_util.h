// What the CUDA parity sources share: an owning device buffer and the normalized error.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "cuda/common/check.cuh"

namespace veloxquant::cuda::parity {

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t size = 0;
  explicit DeviceBuffer(size_t n) : size(n) { VQ_CUDA_CHECK(cudaMalloc(&ptr, n * sizeof(T))); }
  explicit DeviceBuffer(const std::vector<T>& h) : DeviceBuffer(h.size()) { upload(h); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void upload(const std::vector<T>& h) { VQ_CUDA_CHECK(cudaMemcpy(ptr, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)); }
  std::vector<T> download() const {
    std::vector<T> h(size);
    VQ_CUDA_CHECK(cudaMemcpy(h.data(), ptr, size * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
};

// ||out - ref|| / ||ref||.
inline double normalized_error(const std::vector<float>& out, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) num += std::pow(double(out[i]) - ref[i], 2), den += double(ref[i]) * ref[i];
  return std::sqrt(num / den);
}

}  // namespace veloxquant::cuda::parity
