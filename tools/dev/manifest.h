// A JSON description of what a fixture GGUF should hold, written beside it so that an independent
// reader (the PyPI gguf package, in tests/python) can check the file against what was intended.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>

#include "fixture_model.h"

namespace veloxquant::dev {

// zlib's CRC-32 (reflected polynomial 0xEDB88320), so that Python's zlib.crc32 recomputes it.
uint32_t crc32(std::span<const uint8_t> data);

// {"options": {...}, "metadata": [{"key", "type", "element_type" (arrays), "value"}...],
//  "tensors": [{"name", "type", "dims", "bytes", "crc32"}...]}, both lists in file order.
// Types are named as gguf_value_type_name and ggml_type_name name them.
nlohmann::json manifest(const FixtureOptions& options, const Fixture& fixture);

}  // namespace veloxquant::dev
