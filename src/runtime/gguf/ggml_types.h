// Lookup of ggml tensor types by the id stored in a file, and the exact byte size of a tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "veloxquant/gguf.h"

namespace veloxquant::gguf {

// The type with this ggml id, or nullopt for an unknown or retired id.
std::optional<GgmlType> ggml_type_from_id(uint32_t id);

// "f32, f16, ..." naming every type dequantize() decodes, for messages.
std::string decodable_type_names();

// Bytes of a tensor of `type` with `dims` (ggml order). Throws FormatError naming the tensor if
// there are not 1..4 dims, a dim is 0, the element count or byte size overflows int64, or dims[0]
// is not a multiple of the type's block.
uint64_t tensor_bytes(std::string_view name, GgmlType type, std::span<const uint64_t> dims);

}  // namespace veloxquant::gguf
