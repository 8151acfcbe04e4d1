// Rows a codec keeps exact beside a quantized block (kivi_sink's sinks, minicache's retained
// tokens): chosen by rank, and left out of the block's quantization grids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace veloxquant::kept_rows {

// The k of n rows ranked highest (ties: the earlier row), in increasing order. REQUIRES k <= n.
std::vector<size_t> pick(const float* rank, size_t n, size_t k);

// Replaces rows `kept` (increasing) of `block` ([n, d]) by a copy of its first row not kept, so
// that each channel's min and max are those of the other rows. REQUIRES kept.size() < n.
void fill(float* block, size_t n, size_t d, const std::vector<size_t>& kept);

// Why the k u16 indices at `index` (unaligned) are not strictly increasing and below n, as
// "I is token T; expected ..." for the first bad index I; "" when they are.
std::string index_error(const uint8_t* index, size_t k, size_t n);

}  // namespace veloxquant::kept_rows
