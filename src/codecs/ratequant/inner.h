// The quantizer ratequant wraps: which of its parameters are bit widths, which widths it accepts
// for a layer, and its codecs at a given width.
#pragma once

#include <utility>
#include <vector>

#include "veloxquant/method.h"

namespace veloxquant::ratequant {

// Throws SpecError saying why `inner` cannot be wrapped: it has no integer bit-width parameter
// (bits, kbits or vbits), it is calibrated or cross-layer, or its codecs are fitted per stream or
// store tokens by their attention (those keep one codec per layer). The error lists the quantizers
// that can be.
void check_inner(const Spec& inner);

// The range every bit-width parameter of `inner` allows, [lo, hi] (within 0..64).
std::pair<int, int> bit_width_range(const Spec& inner);

// The bit widths `inner` accepts for a layer of `shape`, ascending: every width within the range
// all its bit-width parameters allow for which its make() succeeds with all of them set to it.
// Throws SpecError when there is none.
std::vector<int> accepted_bits(const Spec& inner, const LayerShape& shape);

// inner's parameters with every bit-width parameter set to `bits`.
Params params_at_bits(const Spec& inner, int bits);

// inner's codecs for `shape` with every bit-width parameter set to `bits` (the shape's calibration
// is not handed on: it is ratequant's).
LayerCodecs make_at_bits(const Spec& inner, int bits, LayerShape shape);

}  // namespace veloxquant::ratequant
