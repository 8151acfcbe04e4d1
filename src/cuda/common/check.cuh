// Every CUDA runtime call and every launch is checked; a failure becomes veloxquant::Error naming
// the call, where it was made and CUDA's own message.
#pragma once

#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "veloxquant/error.h"

namespace veloxquant::cuda {

// `file` from the project's root (src/..., tests/..., bench/...; the last such folder in the
// path): __FILE__ holds where the build found it, which says nothing to a user and would put a
// machine's folders into messages.
inline const char* project_path(const char* file) {
  const char* best = file;
  for (const char* root : {"/src/", "/tests/", "/bench/"})
    for (const char* at = std::strstr(file, root); at != nullptr; at = std::strstr(at + 1, root))
      if (at + 1 > best) best = at + 1;
  return best;
}

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) {
    throw Error(std::string(call) + " failed at " + project_path(file) + ":" + std::to_string(line) + ": " +
                cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + "); expected cudaSuccess");
  }
}

}  // namespace veloxquant::cuda

#define VQ_CUDA_CHECK(call) ::veloxquant::cuda::check_cuda((call), #call, __FILE__, __LINE__)
// After a <<<...>>> launch: configuration errors surface here, faults at the next synchronizing call.
#define VQ_CUDA_CHECK_LAUNCH(name) \
  ::veloxquant::cuda::check_cuda(cudaGetLastError(), "launch of " name, __FILE__, __LINE__)
