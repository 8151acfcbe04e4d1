// Writes NumPy's .npy format (version 1.0): a little-endian float32 C-order array.
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

}  // namespace veloxquant::dev
