// NumPy's .npy format (version 1.0): little-endian float C-order arrays, written as float32 and
// read from float16 or float32.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace veloxquant::dev {

// The file image of `data` as an array of `shape`. Throws Error if the shape's product is not
// data.size().
std::vector<char> npy_f32(std::span<const float> data, std::span<const size_t> shape);
void write_npy_f32(const std::string& path, std::span<const float> data,
                   std::span<const size_t> shape);

struct NpyArray {
  std::vector<size_t> shape;
  std::vector<float> data;  // row-major, widened to f32
};
// Reads a '<f2' or '<f4' C-order array. Throws Error naming the file for anything else: another
// dtype, Fortran order, a malformed header, or a data size that does not match the shape.
NpyArray read_npy(const std::string& path);

}  // namespace veloxquant::dev
