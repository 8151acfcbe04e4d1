// What the CUDA benchmarks share: an owning device buffer, the median timing of launches, and the
// results files with their date.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
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

// The command line `PROGRAM --out OUT_DIR [--iters N>=50]`: false, after the usage on stderr,
// when it is not that; iters keeps its default unless given (values below 50 become 50).
inline bool parse_out_and_iters(int argc, char** argv, std::string& out_dir, int& iters) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out_dir = argv[++i];
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::max(50, std::atoi(argv[++i]));
    else out_dir.clear(), i = argc;
  }
  if (out_dir.empty()) std::fprintf(stderr, "usage: %s --out OUT_DIR [--iters N>=50]\n", argv[0]);
  return !out_dir.empty();
}

// The current UTC time, as the results files' "date".
inline std::string utc_now() {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return date;
}

// OUT_DIR/STEM.json and OUT_DIR/STEM.md, open for writing and closed with their owner; ok() is
// false (and stderr says which) when either cannot be opened.
struct ResultFiles {
  FILE* json = nullptr;
  FILE* md = nullptr;
  ResultFiles(const std::string& out_dir, const std::string& stem, const char* program) {
    const std::string json_path = out_dir + "/" + stem + ".json", md_path = out_dir + "/" + stem + ".md";
    json = std::fopen(json_path.c_str(), "w");
    md = std::fopen(md_path.c_str(), "w");
    if (!ok()) std::fprintf(stderr, "%s: cannot write %s and %s\n", program, json_path.c_str(), md_path.c_str());
  }
  ~ResultFiles() {
    if (json != nullptr) std::fclose(json);
    if (md != nullptr) std::fclose(md);
  }
  ResultFiles(const ResultFiles&) = delete;
  ResultFiles& operator=(const ResultFiles&) = delete;
  bool ok() const { return json != nullptr && md != nullptr; }
};

}  // namespace veloxquant::cuda::bench
