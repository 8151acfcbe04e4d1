// The TurboQuant family (Zandieh et al., arXiv 2504.19874): turboquant_mse, turboquant_prod and
// turboquant_rvq. See docs/methods/turboquant.md.
#pragma once

#include "veloxquant/method.h"

namespace veloxquant {
MethodInfo turboquant_mse_method();
MethodInfo turboquant_prod_method();
MethodInfo turboquant_rvq_method();
}  // namespace veloxquant
