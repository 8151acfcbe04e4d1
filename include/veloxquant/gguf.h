// GGUF model files (versions 2 and 3, little-endian): a bounds-checked reader over a read-only
// memory mapping, a writer, the ggml tensor types, their dequantization and Q8_0 / Q4_0
// quantization.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "veloxquant/error.h"

namespace veloxquant {

// ---- ggml tensor types -------------------------------------------------------------------------

// Tensor element types by their ggml ids (ids 4, 5, 31..33 and 36..38 were retired by ggml).
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

const char* ggml_type_name(GgmlType t);  // "q8_0"
// Elements per block and bytes per block (1 and the element size for the plain types).
uint32_t ggml_block_elements(GgmlType t);
uint32_t ggml_block_bytes(GgmlType t);
// Whether dequantize() decodes this type: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K,
// IQ4_NL and IQ4_XS (every type of llama-quantize's usual presets).
bool ggml_type_decodable(GgmlType t);

// Decodes out.size() elements of `type` from `data` to f32. Throws FormatError naming the type if
// it is not decodable, and Error if data does not hold exactly that many elements' blocks.
void dequantize(GgmlType type, std::span<const uint8_t> data, std::span<float> out);

// ggml's reference quantizers (quantize_row_q8_0_ref / quantize_row_q4_0_ref), bit for bit.
// Q8_0 block: fp16 d = max|x| / 127, then 32 int8 round(x / d).
// Q4_0 block: fp16 d = (the value of largest magnitude) / -8, then 16 bytes of nibbles
// min(15, trunc(x / d + 8.5)); the low nibbles hold elements 0..15, the high nibbles 16..31.
// x.size() must be a multiple of 32 and every value finite; Error otherwise.
std::vector<uint8_t> quantize_q8_0(std::span<const float> x);
std::vector<uint8_t> quantize_q4_0(std::span<const float> x);
// The bytes of `x` stored as `type`: F32 as is, F16 and BF16 rounded to nearest even, Q8_0 and
// Q4_0 by the quantizers above. Throws Error naming the type for any other type.
std::vector<uint8_t> encode_weights(GgmlType type, std::span<const float> x);

// ---- metadata values ---------------------------------------------------------------------------

enum class GgufValueType : uint32_t {
  UInt8 = 0, Int8 = 1, UInt16 = 2, Int16 = 3, UInt32 = 4, Int32 = 5, Float32 = 6, Bool = 7,
  String = 8, Array = 9, UInt64 = 10, Int64 = 11, Float64 = 12,
};

const char* gguf_value_type_name(GgufValueType t);  // "uint32", "string", "array"

// One metadata value: a scalar, a string, or an array whose items all share one type (arrays may
// nest). The array keeps its element type so that an empty array still has one.
class GgufValue {
 public:
  struct Array {
    GgufValueType element_type = GgufValueType::UInt8;
    std::vector<GgufValue> items;
  };

  // REQUIRES: T is one of the alternatives below (exact type: uint32_t, not int).
  template <class T>
    requires(!std::is_same_v<T, GgufValue>)
  explicit GgufValue(T v) : v_(std::move(v)) {}
  explicit GgufValue(const char* s) : v_(std::string(s)) {}
  // Throws Error if an item's type differs from element_type.
  static GgufValue array(GgufValueType element_type, std::vector<GgufValue> items);
  template <class T>
  static GgufValue array_of(const std::vector<T>& items) {
    std::vector<GgufValue> values;
    values.reserve(items.size());
    for (const T& item : items) values.emplace_back(item);
    return array(type_of<T>(), std::move(values));
  }

  GgufValueType type() const;
  // The value as int64 when it is of any integer type and fits (converters write counts and ids
  // as uint32, int32 or uint64 depending on their version); nullopt otherwise.
  std::optional<int64_t> as_integer() const;

  // The value as T; throws FormatError "<context>: expected <T's type>, found <actual type>".
  template <class T>
  const T& as(std::string_view context) const {
    if (const T* p = std::get_if<T>(&v_)) return *p;
    throw_type_mismatch(context, type_of<T>());
  }
  template <class T>
  bool is() const {
    return std::holds_alternative<T>(v_);
  }

  // A one-line rendering for people: strings quoted and escaped, arrays shortened to their type,
  // length and first `max_items` items.
  std::string to_string(size_t max_items = 4) const;

  bool operator==(const GgufValue& other) const;

  template <class T>
  static constexpr GgufValueType type_of() {
    if constexpr (std::is_same_v<T, uint8_t>) return GgufValueType::UInt8;
    else if constexpr (std::is_same_v<T, int8_t>) return GgufValueType::Int8;
    else if constexpr (std::is_same_v<T, uint16_t>) return GgufValueType::UInt16;
    else if constexpr (std::is_same_v<T, int16_t>) return GgufValueType::Int16;
    else if constexpr (std::is_same_v<T, uint32_t>) return GgufValueType::UInt32;
    else if constexpr (std::is_same_v<T, int32_t>) return GgufValueType::Int32;
    else if constexpr (std::is_same_v<T, uint64_t>) return GgufValueType::UInt64;
    else if constexpr (std::is_same_v<T, int64_t>) return GgufValueType::Int64;
    else if constexpr (std::is_same_v<T, float>) return GgufValueType::Float32;
    else if constexpr (std::is_same_v<T, double>) return GgufValueType::Float64;
    else if constexpr (std::is_same_v<T, bool>) return GgufValueType::Bool;
    else if constexpr (std::is_same_v<T, std::string>) return GgufValueType::String;
    else {
      static_assert(std::is_same_v<T, Array>, "not a GGUF value type");
      return GgufValueType::Array;
    }
  }

 private:
  [[noreturn]] void throw_type_mismatch(std::string_view context, GgufValueType expected) const;

  std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, uint64_t, int64_t, float,
               double, bool, std::string, Array>
      v_;
};

// ---- reading -----------------------------------------------------------------------------------

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::F32;
  // ggml order: dims[0] is the contiguous (innermost) dimension. 1 to 4 dims, each >= 1.
  std::vector<uint64_t> dims;
  uint64_t elements = 0;
  uint64_t bytes = 0;        // exact size of the data for `type`
  uint64_t file_offset = 0;  // absolute offset of the data in the file (aligned)
};

// A parsed GGUF file. Every count, length, offset and size was checked against the file when it
// was opened; the tensor data stays mapped (read-only) as long as any copy of the object lives.
class GgufFile {
 public:
  // Maps the file read-only and parses it. Throws Error if it cannot be opened and FormatError,
  // prefixed with the path, naming the first problem found in its contents.
  static GgufFile open(const std::string& path);
  // Parses a file image held in memory.
  static GgufFile parse(std::vector<uint8_t> bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return bytes_.size(); }
  uint64_t data_offset() const { return data_offset_; }  // start of the (aligned) data section

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;  // nullptr if absent
  const GgufValue& at(std::string_view key) const;    // FormatError naming the key if absent
  // Typed lookup: FormatError naming the key if it is absent or holds another type.
  template <class T>
  const T& get(std::string_view key) const {
    return at(key).as<T>("metadata key '" + std::string(key) + "'");
  }

  // Tensors in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr if absent
  const GgufTensorInfo& tensor(std::string_view name) const;  // FormatError naming it if absent
  // The tensor's raw bytes inside the mapping (valid while this object or a copy lives).
  std::span<const uint8_t> tensor_data(const GgufTensorInfo& t) const;
  // The tensor decoded to f32; FormatError naming the tensor and its type if not decodable.
  std::vector<float> tensor_f32(const GgufTensorInfo& t) const;

 private:
  GgufFile(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes);
  class Parser;

  std::shared_ptr<const void> owner_;  // keeps the mapping (or buffer) behind bytes_ alive
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// ---- writing -----------------------------------------------------------------------------------

// Builds a GGUF v3 file. A "general.alignment" entry (uint32, a power of two) sets the data
// alignment; 32 otherwise.
class GgufWriter {
 public:
  // Throws Error on a duplicate key or a bad general.alignment.
  void add_metadata(std::string key, GgufValue value);
  // dims in ggml order; data must hold exactly the bytes of dims' elements of `type`.
  // Throws Error on a duplicate name, bad dims, or a data size that does not match.
  void add_tensor(std::string name, GgmlType type, std::vector<uint64_t> dims,
                  std::vector<uint8_t> data);

  std::vector<uint8_t> to_bytes() const;
  void write_file(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> dims;
    std::vector<uint8_t> data;
  };
  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace veloxquant
