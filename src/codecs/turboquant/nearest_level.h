// Vectorized scalar quantization: the index of the nearest codebook level for many values at
// once, identical to ScalarCodebook::quantize (the number of boundaries <= x) value by value.
// Encoding spends most of its time here, one call per rotated vector.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/lloyd_max.h"

namespace veloxquant::turboquant {

// codes[i] = codebook.quantize(x[i]) for i < n.
void nearest_levels(const ScalarCodebook& codebook, const float* x, size_t n, uint8_t* codes);

}  // namespace veloxquant::turboquant
