// What the KIVI kernels run: kivi_format.cu refuses the rest, and kivi's CUDA form
// (codecs/kivi/kivi_method.cpp) answers cuda::supports() from it. Plain C++.
#pragma once

#include <string>

#include "cuda/cache/config_rules.h"

namespace veloxquant::cuda {

// Every head_dim config_problem() takes: values in lane quads or the dense stream, value groups
// that divide head_dim or not.
inline std::string kivi_problem(const CacheConfig& c) { return windowed_problem("kivi", "kivi bits", c); }

}  // namespace veloxquant::cuda
