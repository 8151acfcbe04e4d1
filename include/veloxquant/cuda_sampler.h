// Sampling on the GPU (built with -DVELOXQUANT_CUDA=ON, sm_90): picks the next token of each row
// of logits in GPU memory as Sampler::pick does on the host (veloxquant/sampler.h): repetition
// penalty, top-k, top-p, temperature, then the row's draw, ties to the lower token id. The host
// Sampler supplies each row's SampleRequest, so a GPU-sampled sequence is the one the host's
// Sampler would give for the same logits and seed. Greedy rows take a per-row argmax; sampled rows
// sort their logits (one radix sort per row) and one block per row scans the kept candidates.
// No CUDA headers needed: device pointers are plain pointers, the stream is a cudaStream_t as void*.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "veloxquant/sampler.h"

namespace veloxquant::cuda {

class DeviceSampler {
 public:
  // Rows of `vocab` logits, at most max_rows per call. Throws Error when either is 0.
  DeviceSampler(size_t vocab, size_t max_rows);
  ~DeviceSampler();
  DeviceSampler(const DeviceSampler&) = delete;
  DeviceSampler& operator=(const DeviceSampler&) = delete;

  // The token of each row: logits is device memory, row r at logits + r * row_stride (floats),
  // one request per row. Only the chosen ids come back to the host. Throws Error naming the row
  // for a request the host Sampler would refuse and for more rows than max_rows.
  std::vector<int32_t> sample(const float* logits, size_t row_stride, std::span<const SampleRequest> requests,
                              void* stream = nullptr);
  // The same from host logits [requests.size(), vocab], uploaded first (tests, benchmarks).
  std::vector<int32_t> sample_host(std::span<const float> logits, std::span<const SampleRequest> requests);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veloxquant::cuda
