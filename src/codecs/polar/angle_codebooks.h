// Lloyd-Max codebooks for PolarQuant's angles, fitted once to their analytic distributions
// (Han et al., arXiv 2502.02617, Lemma 2): after random preconditioning the coordinates are
// i.i.d. Gaussian, so
//  - level 1 angles (of coordinate pairs) are uniform on [0, 2pi);
//  - level l >= 2 angles are atan2 of two independent chi variables with 2^(l-1) degrees of
//    freedom each, density proportional to sin^(2^(l-1) - 1)(2 psi) on [0, pi/2]: concentrated
//    around pi/4, more so at every level.
#pragma once

#include <cstddef>

#include "core/lloyd_max.h"

namespace veloxquant::polar {

// Density (unnormalized) of a level-`level` angle.
double angle_density(size_t level, double psi);
double angle_range_hi(size_t level);  // 2pi at level 1, pi/2 deeper; the range starts at 0

// The 2^bits-level codebook of a level-`level` angle. Solved on first use and kept for the life
// of the process (thread-safe), since every layer and head shares it.
// REQUIRES: 1 <= level <= 16, 1 <= bits <= 8.
const ScalarCodebook& angle_codebook(size_t level, unsigned bits);

}  // namespace veloxquant::polar
