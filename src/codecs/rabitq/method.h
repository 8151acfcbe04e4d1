// The `rabitq` method: RaBitQ 1-bit keys over a per-head IVF, turboquant_mse values.
#pragma once

#include "veloxquant/method.h"

namespace veloxquant {
MethodInfo rabitq_method();
}
