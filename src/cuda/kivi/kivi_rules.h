// What the KIVI kernels run: kivi_format.cu refuses the rest, and kivi's CUDA form
// (codecs/kivi/kivi_method.cpp) answers cuda::supports() from it. Plain C++.
#pragma once

#include <algorithm>
#include <string>

#include "cuda/cache/config_rules.h"

namespace veloxquant::cuda {

inline std::string kivi_problem(const CacheConfig& c) {
  if (std::string p = compact_head_dim_problem("kivi", c); !p.empty()) return p;
  if (std::string p = windowed_problem("kivi", "kivi bits", c); !p.empty()) return p;
  if (c.head_dim % std::min(c.group, c.head_dim) != 0)
    return "kivi group " + std::to_string(c.group) + " does not divide head_dim " + std::to_string(c.head_dim) +
           " into value groups; expected a divisor or >= head_dim";
  return {};
}

}  // namespace veloxquant::cuda
