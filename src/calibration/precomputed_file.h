// Reading a precomputed-table file image (veloxquant/precomputed.h): for the loader and the tests.
#pragma once

#include <cstdint>
#include <span>

#include "core/precomputed.h"

namespace veloxquant {

// Every table of a file image, after checking the magic, the version and every section's length
// and XXH64. Throws FormatError naming the problem.
Tables parse_precomputed(std::span<const uint8_t> bytes);

}  // namespace veloxquant
