// The head sizes every attention and append kernel is built for, and the one dispatch from a
// layer's head_dim to a kernel template (config_rules.h refuses other sizes before any launch).
#pragma once

#include <string>

#include "veloxquant/error.h"

namespace veloxquant::cuda {

// make.template operator()<D>() for head_dim D of 64, 80, 96, 128 or 256; for any other an Error
// naming `what` (the kernel) and the sizes it takes.
template <class Make>
auto with_head_dim(int head_dim, const char* what, Make&& make) {
  switch (head_dim) {
    case 64: return make.template operator()<64>();
    case 80: return make.template operator()<80>();
    case 96: return make.template operator()<96>();
    case 128: return make.template operator()<128>();
    case 256: return make.template operator()<256>();
    default: break;
  }
  throw Error(std::string(what) + ": head_dim " + std::to_string(head_dim) +
              "; expected 64, 80, 96, 128 or 256");
}

}  // namespace veloxquant::cuda
