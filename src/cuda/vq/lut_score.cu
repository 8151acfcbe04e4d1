#include "cuda/vq/lut_score.cuh"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "cuda/common/check.cuh"

namespace veloxquant::cuda {

void check_score_shape(const ScoreShape& shape, size_t smem, const char* what) {
  if (shape.group < 1 || shape.group > kMaxScoreGroup) {
    throw Error(std::string(what) + ": " + std::to_string(shape.group) +
                " query heads per KV head; expected 1 to " + std::to_string(kMaxScoreGroup));
  }
  if (shape.kv_heads == 0 || shape.tokens == 0) {
    throw Error(std::string(what) + ": " + std::to_string(shape.kv_heads) + " KV heads of " +
                std::to_string(shape.tokens) + " tokens; expected at least one of each");
  }
  int device = 0, limit = 0;
  VQ_CUDA_CHECK(cudaGetDevice(&device));
  VQ_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (smem > static_cast<size_t>(limit)) {
    throw Error(std::string(what) + ": the lookup tables of " + std::to_string(shape.group) +
                " query heads take " + std::to_string(smem) + " bytes of shared memory; expected at most " +
                std::to_string(limit) + " (fewer query heads per KV head, or fewer sub-spaces)");
  }
}

int score_splits(const void* kernel, size_t smem, const ScoreShape& shape) {
  int device = 0, sms = 0;
  VQ_CUDA_CHECK(cudaGetDevice(&device));
  VQ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  {
    // Raising the limit costs host time that a decode step would pay on every call: once per
    // kernel and device, to the most any call has asked for.
    static std::mutex mutex;
    static std::map<std::pair<const void*, int>, size_t> raised;
    const std::lock_guard<std::mutex> lock(mutex);
    size_t& limit = raised[{kernel, device}];
    if (smem > limit) {
      VQ_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      limit = smem;
    }
  }
  const size_t cover = std::max<size_t>(1, static_cast<size_t>(sms) / shape.kv_heads);
  const size_t most = (shape.tokens + kScoreThreads - 1) / kScoreThreads;
  return static_cast<int>(cover < most ? cover : most);
}

}  // namespace veloxquant::cuda
