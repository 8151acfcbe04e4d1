// What the CUDA parity sources share: an owning device buffer, the normalized error, random
// rows in the GPU's and the CPU's layouts, and attention into a poisoned output.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "cuda/common/check.cuh"
#include "veloxquant/tensor.h"

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

// A case of a parameterized cache test: a spec at a head size, printed and named for GoogleTest.
struct SpecAtDim {
  const char* spec;
  size_t dim;
};
inline void PrintTo(const SpecAtDim& c, std::ostream* os) { *os << c.spec << " head_dim " << c.dim; }
inline std::string case_name(const testing::TestParamInfo<SpecAtDim>& info) {
  std::string s = std::string(info.param.spec) + "_d" + std::to_string(info.param.dim);
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// ||out - ref|| / ||ref||.
inline double normalized_error(const std::vector<float>& out, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < out.size(); ++i) num += std::pow(double(out[i]) - ref[i], 2), den += double(ref[i]) * ref[i];
  return std::sqrt(num / den);
}

// Random rows in the GPU layout [streams = batch x kv_heads, n, dim]; keys get a few outlier
// channels (the structure KIVI's per-channel keys are for).
inline std::vector<uint16_t> random_rows(std::mt19937& gen, size_t streams, size_t n, size_t dim, bool keys) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> x(streams * n * dim);
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t c = i % dim;
    const float scale = keys && c % 16 == 3 ? 6.0f : 1.0f;
    x[i] = f32_to_f16(normal(gen) * scale);
  }
  return x;
}

// Sequence b of [batch, kv_heads, n, dim] as the CPU's [n, kv_heads, dim].
inline std::vector<uint16_t> cpu_rows(const std::vector<uint16_t>& x, size_t kv_heads, size_t b, size_t n,
                                      size_t dim) {
  std::vector<uint16_t> out(n * kv_heads * dim);
  for (size_t h = 0; h < kv_heads; ++h)
    for (size_t t = 0; t < n; ++t)
      for (size_t c = 0; c < dim; ++c)
        out[(t * kv_heads + h) * dim + c] = x[((b * kv_heads + h) * n + t) * dim + c];
  return out;
}

// n random fp16 queries, and what attend(device queries, device output) writes into an output
// of n floats poisoned with NaN beforehand; all_written turns false if any element stays NaN.
template <class Attend>
std::vector<float> poisoned_attend(std::mt19937& gen, std::vector<uint16_t>& q, size_t n, bool& all_written,
                                   Attend&& attend) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  q.resize(n);
  for (auto& x : q) x = f32_to_f16(normal(gen));
  DeviceBuffer<uint16_t> dq(n);
  DeviceBuffer<float> dout(n);
  dq.upload(q);
  VQ_CUDA_CHECK(cudaMemset(dout.ptr, 0xFF, n * sizeof(float)));  // NaN everywhere
  attend(dq.ptr, dout.ptr);
  VQ_CUDA_CHECK(cudaGetLastError());
  VQ_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> out(n);
  VQ_CUDA_CHECK(cudaMemcpy(out.data(), dout.ptr, n * sizeof(float), cudaMemcpyDeviceToHost));
  for (float x : out) all_written = all_written && std::isfinite(x);
  return out;
}

}  // namespace veloxquant::cuda::parity
