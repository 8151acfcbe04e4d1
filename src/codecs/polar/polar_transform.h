// The recursive polar transform of PolarQuant (Han et al., arXiv 2502.02617, Section 3) on one
// block of 2^levels coordinates. Level 1 turns coordinate pairs (x_2j, x_2j+1) into a radius and
// an angle in [0, 2pi); every further level turns pairs of radii into a radius and an angle in
// [0, pi/2]. What is left is one radius and 2^levels - 1 angles.
//
// Angles are stored level-major: the 2^(levels-1) angles of level 1 first, then the
// 2^(levels-2) of level 2, ..., then the single angle of the last level.
//
// forward() and inverse() are the transform as the paper defines it, the reference the tests hold
// the codec to; the codec runs it a level at a time over a whole vector with quantized angles
// (forward_level_cells, inverse_level).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace veloxquant::polar {

// Angles within level l (1-based) of a block transformed with `levels` levels.
constexpr size_t angles_at_level(size_t levels, size_t level) { return size_t{1} << (levels - level); }

// Writes the 2^levels - 1 angles and returns the radius (the block's Euclidean norm). Works in
// place: x is overwritten (with intermediate radii).
float forward(float* x, size_t levels, float* angles);

// The cells of an angle codebook on [0, 2pi) (its boundaries, ascending) as sign tests on the
// pair itself: for a pair (a, b) at angle psi and a boundary beta, psi >= beta exactly when
// b cos beta - a sin beta = r sin(psi - beta) >= 0, as long as psi - beta stays within (-pi, pi).
// So a pair in the upper half-plane (psi >= pi) is turned by pi first and tested against the
// boundaries at or above pi, less pi; below pi it is tested against the boundaries below pi.
struct AngleCells {
  std::vector<float> lower_cos, lower_sin;  // boundaries below pi
  std::vector<float> upper_cos, upper_sin;  // boundaries at or above pi, less pi
  explicit AngleCells(const std::vector<float>& boundaries);
};

// One level of forward() with its angles quantized: pair j = (x[2j], x[2j+1]) gets the number of
// boundaries at or below its angle in codes[j] (a ScalarCodebook's code up to float rounding at a
// boundary) and its radius in x[j]. No atan2: a level is a few multiply-adds and compares per
// pair and boundary, in loops the compiler vectorizes. scratch: 4 * pairs floats.
void forward_level_cells(float* x, size_t pairs, const AngleCells& cells, uint8_t* codes, float* scratch);

// One level of inverse() with quantized angles: pair j becomes (r cos, r sin) of its code's
// centroid, r = radii[j], written to out[2j], out[2j + 1] (out must not overlap radii).
void inverse_level(const float* radii, size_t pairs, const uint8_t* codes, const float* cosines,
                   const float* sines, float* out);

// Inverse from the cosines and sines of the angles (same order), which is how the decoder holds
// quantized angles: a table lookup per code instead of a trigonometric call. Writes the 2^levels
// coordinates to x, working in place without scratch memory.
void inverse(float radius, const float* cosines, const float* sines, size_t levels, float* x);

}  // namespace veloxquant::polar
