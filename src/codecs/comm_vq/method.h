// The `comm_vq` method: keys before RoPE in additive (residual) VQ with RoPE-commutative
// codebooks trained by EM (calibrated), rotated at attend time; values in turboquant_mse.
// See docs/methods/comm_vq.md.
#pragma once

#include "veloxquant/method.h"

namespace veloxquant {
MethodInfo comm_vq_method();
}
