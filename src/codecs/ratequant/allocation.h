// ratequant's allocation for a whole model, from the distortions its calibration measured.
#pragma once

#include <vector>

#include "veloxquant/method.h"

namespace veloxquant::ratequant {

// The bit width of every KV head of every layer, bits[layer][head], for ratequant's params `p`
// and a layer shape whose calibration is ratequant's artifact for them: the distortion model
// fitted to every head's measurements, then reverse water-filling over the heads (per=head) or
// the layers (per=layer, a layer's alpha the sum of its heads'). Every layer computes the same
// allocation. Throws Error naming the problem when there is no calibration or it does not match,
// FormatError when a table is not one the fit writes.
std::vector<std::vector<int>> allocate_model(const Params& p, const LayerShape& shape);

}  // namespace veloxquant::ratequant
