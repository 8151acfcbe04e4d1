// ratequant's allocation for a whole model, from the distortions its calibration measured.
#pragma once

#include <string>
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

// The widths the spec's bits= names instead of an allocation, bits[layer][head] for a model of
// shape.layers layers of shape.kv_heads KV heads: one width per layer, or one per KV head of every
// layer (layer-major), separated by '/'; empty when bits= is empty. Each must be a width `inner`
// accepts (within its bit-width parameters' range). Throws SpecError naming the entry or the
// count and what is expected.
std::vector<std::vector<int>> explicit_bits(const Params& p, const Spec& inner, const LayerShape& shape);

// bits= when given, else the calibrated allocation (allocate_model).
std::vector<std::vector<int>> model_bits(const Params& p, const Spec& inner, const LayerShape& shape);

}  // namespace veloxquant::ratequant
