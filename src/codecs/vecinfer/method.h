// The `vecinfer` method: smoothed, Hadamard-rotated keys in product VQ (calibrated), values in
// turboquant_mse. See docs/methods/vecinfer.md.
#pragma once

#include "veloxquant/method.h"

namespace veloxquant {
MethodInfo vecinfer_method();
}
