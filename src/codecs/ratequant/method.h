// The `ratequant` method: per-KV-head (or per-layer) bit widths for any quantizer with a bit-width
// parameter, allocated by reverse water-filling on distortions measured at calibration.
#pragma once

#include "veloxquant/method.h"

namespace veloxquant {
MethodInfo ratequant_method();
}
