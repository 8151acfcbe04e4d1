// The recursive polar transform of PolarQuant (Han et al., arXiv 2502.02617, Section 3) on one
// block of 2^levels coordinates. Level 1 turns coordinate pairs (x_2j, x_2j+1) into a radius and
// an angle in [0, 2pi); every further level turns pairs of radii into a radius and an angle in
// [0, pi/2]. What is left is one radius and 2^levels - 1 angles.
//
// Angles are stored level-major: the 2^(levels-1) angles of level 1 first, then the
// 2^(levels-2) of level 2, ..., then the single angle of the last level.
#pragma once

#include <cstddef>

namespace veloxquant::polar {

// Angles within level l (1-based) of a block transformed with `levels` levels.
constexpr size_t angles_at_level(size_t levels, size_t level) { return size_t{1} << (levels - level); }

// Writes the 2^levels - 1 angles and returns the radius (the block's Euclidean norm). Works in
// place: x is overwritten (with intermediate radii).
float forward(float* x, size_t levels, float* angles);

// Inverse from the cosines and sines of the angles (same order), which is how the decoder holds
// quantized angles: a table lookup per code instead of a trigonometric call. Writes the 2^levels
// coordinates to x, working in place without scratch memory.
void inverse(float radius, const float* cosines, const float* sines, size_t levels, float* x);

}  // namespace veloxquant::polar
