#include "runtime/gguf/ggml_types.h"

#include <fmt/format.h>

#include <array>
#include <limits>
#include <string>

#include "runtime/gguf/checked_math.h"

namespace veloxquant {
namespace {

struct TypeTraits {
  GgmlType type;
  const char* name;
  uint32_t block_elements;
  uint32_t block_bytes;
};

// Block layouts as in ggml-common.h; the k-quants and i-quants use super-blocks of 256.
constexpr std::array<TypeTraits, 32> kTypes{{
    {GgmlType::F32, "f32", 1, 4},          {GgmlType::F16, "f16", 1, 2},
    {GgmlType::Q4_0, "q4_0", 32, 18},      {GgmlType::Q4_1, "q4_1", 32, 20},
    {GgmlType::Q5_0, "q5_0", 32, 22},      {GgmlType::Q5_1, "q5_1", 32, 24},
    {GgmlType::Q8_0, "q8_0", 32, 34},      {GgmlType::Q8_1, "q8_1", 32, 36},
    {GgmlType::Q2_K, "q2_K", 256, 84},     {GgmlType::Q3_K, "q3_K", 256, 110},
    {GgmlType::Q4_K, "q4_K", 256, 144},    {GgmlType::Q5_K, "q5_K", 256, 176},
    {GgmlType::Q6_K, "q6_K", 256, 210},    {GgmlType::Q8_K, "q8_K", 256, 292},
    {GgmlType::IQ2_XXS, "iq2_xxs", 256, 66}, {GgmlType::IQ2_XS, "iq2_xs", 256, 74},
    {GgmlType::IQ3_XXS, "iq3_xxs", 256, 98}, {GgmlType::IQ1_S, "iq1_s", 256, 50},
    {GgmlType::IQ4_NL, "iq4_nl", 32, 18},  {GgmlType::IQ3_S, "iq3_s", 256, 110},
    {GgmlType::IQ2_S, "iq2_s", 256, 82},   {GgmlType::IQ4_XS, "iq4_xs", 256, 136},
    {GgmlType::I8, "i8", 1, 1},            {GgmlType::I16, "i16", 1, 2},
    {GgmlType::I32, "i32", 1, 4},          {GgmlType::I64, "i64", 1, 8},
    {GgmlType::F64, "f64", 1, 8},          {GgmlType::IQ1_M, "iq1_m", 256, 56},
    {GgmlType::BF16, "bf16", 1, 2},        {GgmlType::TQ1_0, "tq1_0", 256, 54},
    {GgmlType::TQ2_0, "tq2_0", 256, 66},   {GgmlType::MXFP4, "mxfp4", 32, 17},
}};

const TypeTraits* find_traits(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

// Every GgmlType enumerator is in the table, so this lookup cannot fail for a valid enum value.
const TypeTraits& traits(GgmlType type) {
  const TypeTraits* t = find_traits(static_cast<uint32_t>(type));
  if (!t) throw Error(fmt::format("ggml type id {} is not a known type", static_cast<uint32_t>(type)));
  return *t;
}

}  // namespace

const char* ggml_type_name(GgmlType t) { return traits(t).name; }
uint32_t ggml_block_elements(GgmlType t) { return traits(t).block_elements; }
uint32_t ggml_block_bytes(GgmlType t) { return traits(t).block_bytes; }

namespace gguf {

std::optional<GgmlType> ggml_type_from_id(uint32_t id) {
  if (const TypeTraits* t = find_traits(id)) return t->type;
  return std::nullopt;
}

std::string decodable_type_names() {
  std::string names;
  for (const auto& t : kTypes)
    if (ggml_type_decodable(t.type)) names += (names.empty() ? "" : ", ") + std::string(t.name);
  return names;
}

uint64_t tensor_bytes(std::string_view name, GgmlType type, std::span<const uint64_t> dims) {
  constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();  // ggml counts in int64
  if (dims.empty() || dims.size() > 4) {
    throw FormatError(fmt::format("tensor '{}': {} dims; expected 1 to 4", name, dims.size()));
  }
  uint64_t elements = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 || dims[i] > kMax) {
      throw FormatError(fmt::format("tensor '{}': dim {} is {}; expected 1 to {}", name, i,
                                    dims[i], kMax));
    }
    const auto product = checked_mul(elements, dims[i]);
    if (!product || *product > kMax) {
      throw FormatError(fmt::format("tensor '{}': the element count of dims [{}] overflows int64",
                                    name, fmt::join(dims, ", ")));
    }
    elements = *product;
  }
  const TypeTraits& t = traits(type);
  if (dims[0] % t.block_elements != 0) {
    throw FormatError(fmt::format("tensor '{}': dim 0 is {}, not a multiple of the {} block size {}",
                                  name, dims[0], t.name, t.block_elements));
  }
  const auto bytes = checked_mul(elements / t.block_elements, t.block_bytes);
  if (!bytes || *bytes > kMax) {
    throw FormatError(fmt::format("tensor '{}': the byte size of {} {} elements overflows int64",
                                  name, elements, t.name));
  }
  return *bytes;
}

}  // namespace gguf
}  // namespace veloxquant
