// Random orthogonal rotations used by the rotation-based codecs.
//  - fwht: in-place fast Walsh-Hadamard transform, orthonormal (scaled by 1/sqrt(n)), n a power
//    of two. It is its own inverse.
//  - Rotation: y = H D x / sqrt(d) with random signs D when d is a power of two (O(d log d)),
//    otherwise a dense Haar-random orthogonal matrix from the QR of a Gaussian matrix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace veloxquant {

bool is_power_of_two(size_t n);
// REQUIRES: is_power_of_two(n).
void fwht(float* x, size_t n);

// Haar-random d x d orthogonal matrix, row-major (Eigen QR with the sign fix of Mezzadri 2007).
std::vector<float> random_orthogonal(size_t d, uint64_t seed);

class Rotation {
 public:
  Rotation() = default;
  Rotation(size_t dim, uint64_t seed);
  size_t dim() const { return dim_; }
  bool is_hadamard() const { return dense_.empty(); }
  // In place on `rows` consecutive vectors of dim floats.
  void forward(float* x, size_t rows = 1) const;
  void inverse(float* x, size_t rows = 1) const;
  // Bytes this rotation keeps: one sign bit per coordinate, or the dense f32 matrix.
  size_t state_bytes() const;
  // What it applies (for the GPU kernels, which repeat it): the random signs before the
  // orthonormal Hadamard transform, or the dense matrix (row-major, forward y = M x); the other
  // is empty.
  const std::vector<float>& signs() const { return signs_; }
  const std::vector<float>& matrix() const { return dense_; }

 private:
  size_t dim_ = 0;
  std::vector<float> signs_;  // Hadamard case
  std::vector<float> dense_;  // dense case, row-major
};

}  // namespace veloxquant
