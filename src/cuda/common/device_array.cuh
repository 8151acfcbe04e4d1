// An owning device allocation, movable, freed with its owner (the runtime's weights, scratch and
// sampler buffers).
#pragma once

#include <cstddef>
#include <utility>

#include "cuda/common/check.cuh"

namespace veloxquant::cuda {

template <class T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t size = 0;
  DeviceArray() = default;
  explicit DeviceArray(size_t n) : size(n) { if (n > 0) VQ_CUDA_CHECK(cudaMalloc(&ptr, n * sizeof(T))); }
  DeviceArray(const T* host, size_t n) : DeviceArray(n) {
    if (n > 0) VQ_CUDA_CHECK(cudaMemcpy(ptr, host, n * sizeof(T), cudaMemcpyHostToDevice));
  }
  DeviceArray(DeviceArray&& o) noexcept : ptr(o.ptr), size(o.size) { o.ptr = nullptr, o.size = 0; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(ptr, o.ptr), std::swap(size, o.size);
    return *this;
  }
  ~DeviceArray() { if (ptr != nullptr) cudaFree(ptr); }
};

}  // namespace veloxquant::cuda
