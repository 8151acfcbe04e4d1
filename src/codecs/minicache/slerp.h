// MiniCache's merge of two layers' vectors of one token (Liu et al., NeurIPS 2024, arXiv
// 2405.14366): each vector splits into a magnitude and a direction; the two directions are
// interpolated along the great circle between them (SLERP), and the angle between them says how
// far apart the layers are for that token.
#pragma once

#include <cstddef>

namespace veloxquant::minicache {

// The angle between the directions of a and b (length d), in [0, pi], computed in double. 0 when
// either is the zero vector (it has no direction to differ by).
double angle_between(const float* a, const float* b, size_t d);

// out = SLERP(u, v, t) of the unit directions u and v at angle `angle`:
//   sin((1 - t) angle) / sin(angle) * u + sin(t angle) / sin(angle) * v,
// a unit vector (t = 0 gives u, t = 1 gives v). When sin(angle) is too small to divide by, the
// normalized straight-line interpolation; when that is zero as well (exact opposites at t = 1/2),
// u.
void slerp(const float* u, const float* v, size_t d, double angle, double t, float* out);

}  // namespace veloxquant::minicache
