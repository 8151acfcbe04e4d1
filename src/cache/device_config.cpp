// cuda::supports() and device_cache_config(): a spec on the CUDA backend, from the method's own
// CUDA form (MethodInfo::cuda_config) checked against what the kernels run
// (cuda/cache/config_rules.h). It lives in the CPU library, which owns the seed derivations the
// forms use, and needs no CUDA toolkit.
#include <fmt/format.h>

#include <string>

#include "cuda/cache/config_rules.h"
#include "veloxquant/calibration.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace veloxquant::cuda {
namespace {

std::string with_cuda_forms(const std::vector<MethodInfo>& methods) {
  std::string names;
  for (const MethodInfo& m : methods)
    if (m.cuda_config) names += (names.empty() ? "" : ", ") + m.name;
  return names;
}

}  // namespace

CacheConfig device_cache_config(const Spec& spec, const LayerShape& shape, size_t batch, size_t capacity) {
  const std::string text = spec.to_string();
  if (spec.eviction && !spec.eviction->cuda_config) {
    throw SpecError(fmt::format("'{}': the CUDA backend evicts with {}; {} runs on the CPU cache", text,
                                with_cuda_forms(registered_policies()), spec.eviction->name));
  }
  if (!spec.method->cuda_config) {
    throw SpecError(fmt::format("'{}': the CUDA backend runs {}; {} runs on the CPU cache", text,
                                with_cuda_forms(registered_methods()), spec.method->name));
  }
  CacheConfig c;
  c.batch = batch;
  c.kv_heads = shape.kv_heads;
  c.head_dim = shape.head_dim;
  c.capacity = capacity;
  c.rope.dims = 0;  // keys arrive rotated, as KVCache::append(k, v) takes them
  c.keys_before_rope = spec.method->keys_before_rope;
  c.window = shape.window, c.softcap = shape.softcap;
  // A calibrated spec's artifacts= directory is read here when the caller has not, as KVCache does.
  std::string format_problem = spec.method->cuda_config(spec.params, with_calibration(spec, shape), c);
  if (spec.eviction && format_problem.empty())
    format_problem = spec.eviction->cuda_config(spec.eviction_params, shape, c);
  // The shape's problem first: the format's rules may take the shape as valid.
  const std::string shape_problem = config_problem(c);
  const std::string& problem = shape_problem.empty() ? format_problem : shape_problem;
  if (!problem.empty()) throw SpecError(fmt::format("'{}' on the CUDA backend: {}", text, problem));
  return c;
}

Support supports(const Spec& spec, const LayerShape& shape) {
  try {
    device_cache_config(spec, shape, 1, 1);
    return {};
  } catch (const SpecError& e) {
    return {e.what()};
  }
}

}  // namespace veloxquant::cuda
