// What the methods' CUDA forms (MethodInfo::cuda_config) share: the GPU caches store keys and
// values with one bit width.
#pragma once

#include <string>

#include "veloxquant/spec.h"

namespace veloxquant {

// The common value of the two parameters; throws SpecError naming both when they differ.
unsigned cuda_equal_bits(const std::string& method, const Params& p, const char* key_param, const char* value_param);

}  // namespace veloxquant
