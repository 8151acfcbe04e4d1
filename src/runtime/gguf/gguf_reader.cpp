// GGUF parsing. Every count, length and offset read from the file is checked against the bytes
// that are left before anything is allocated or addressed: llama.cpp's gguf.cpp is the model.
#include <fmt/format.h>

#include <array>
#include <span>

#include "runtime/gguf/byte_reader.h"
#include "runtime/gguf/checked_math.h"
#include "runtime/gguf/ggml_types.h"
#include "runtime/gguf/mapped_file.h"
#include "veloxquant/gguf.h"

namespace veloxquant {
namespace {

using gguf::ByteReader;

// Arrays of arrays are legal; a bound on the nesting keeps a hostile file from exhausting the stack.
constexpr int kMaxArrayDepth = 8;
// Each array item becomes an in-memory value of about 40 bytes, whatever its size in the file:
// without a bound, a file of one huge uint8 array would ask for 40 times its size in memory.
// Real vocabularies (tokens, scores, types, merges of 256k-token models) stay near a million.
constexpr uint64_t kMaxMetadataArrayItems = uint64_t{1} << 24;
// Smallest encodings, used to reject counts the rest of the file cannot possibly hold:
// a metadata entry is a key length, a type and a one-byte value; a tensor info is a name length,
// a dim count, one dim, a type and an offset.
constexpr uint64_t kMinMetadataEntryBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

bool is_value_type(uint32_t id) { return id <= static_cast<uint32_t>(GgufValueType::Float64); }

// Bytes that one value of this type takes at least: its size for scalars, the length for a
// string, the element type and length for an array.
uint64_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::UInt8: case GgufValueType::Int8: case GgufValueType::Bool: return 1;
    case GgufValueType::UInt16: case GgufValueType::Int16: return 2;
    case GgufValueType::UInt32: case GgufValueType::Int32: case GgufValueType::Float32: return 4;
    case GgufValueType::UInt64: case GgufValueType::Int64: case GgufValueType::Float64: return 8;
    case GgufValueType::String: return 8;
    case GgufValueType::Array: return 4 + 8;
  }
  return 1;
}

// Throws unless `count` items of at least `min_bytes` each fit in what is left of the file.
void check_count_fits(const ByteReader& r, uint64_t count, uint64_t min_bytes, std::string_view what) {
  const auto needed = gguf::checked_mul(count, min_bytes);
  if (!needed || *needed > r.remaining()) {
    throw FormatError(fmt::format("{} is {}, but only {} bytes are left in the file at offset {} "
                                  "(each takes at least {} bytes)",
                                  what, count, r.remaining(), r.offset(), min_bytes));
  }
}

}  // namespace

class GgufFile::Parser {
 public:
  explicit Parser(GgufFile& file) : f_(file), r_(file.bytes_) {}

  void run() {
    read_header();
    read_metadata();
    read_alignment();
    read_tensor_infos();
    place_tensor_data();
  }

 private:
  void read_header() {
    const auto magic = r_.read<std::array<char, 4>>("GGUF magic");
    if (std::string_view(magic.data(), 4) != "GGUF") {
      throw FormatError(fmt::format("not a GGUF file: it starts with bytes {:02x}; expected \"GGUF\"",
                                    fmt::join(std::span(reinterpret_cast<const uint8_t*>(magic.data()), 4), " ")));
    }
    const uint32_t version = r_.read<uint32_t>("GGUF version");
    if (version == 1) {
      throw FormatError("GGUF version 1 is not supported (it has 32-bit counts and lengths); "
                        "expected version 2 or 3");
    }
    if (version != 2 && version != 3) {
      const uint32_t swapped = __builtin_bswap32(version);
      if (swapped >= 1 && swapped <= 3) {
        throw FormatError(fmt::format("GGUF version field is 0x{:08x}: a big-endian file (version {}), "
                                      "which is not supported; expected little-endian version 2 or 3",
                                      version, swapped));
      }
      throw FormatError(fmt::format("unsupported GGUF version {}; expected 2 or 3", version));
    }
    f_.version_ = version;
    tensor_count_ = r_.read<uint64_t>("tensor count");
    metadata_count_ = r_.read<uint64_t>("metadata entry count");
    check_count_fits(r_, metadata_count_, kMinMetadataEntryBytes, "metadata entry count");
    check_count_fits(r_, tensor_count_, kMinTensorInfoBytes, "tensor count");
  }

  void read_metadata() {
    f_.metadata_.reserve(metadata_count_);
    for (uint64_t i = 0; i < metadata_count_; ++i) {
      std::string key = r_.read_string(fmt::format("key of metadata entry {}", i));
      const std::string what = fmt::format("metadata '{}'", key);
      const uint32_t type = r_.read<uint32_t>(fmt::format("value type of {}", what));
      GgufValue value = read_value(type, what, 0);
      const auto [it, inserted] = f_.metadata_index_.emplace(key, f_.metadata_.size());
      if (!inserted) {
        throw FormatError(fmt::format("duplicate metadata key '{}' (entries {} and {})", key,
                                      it->second, i));
      }
      f_.metadata_.emplace_back(std::move(key), std::move(value));
    }
  }

  GgufValue read_value(uint32_t type_id, const std::string& what, int depth) {
    if (!is_value_type(type_id)) {
      throw FormatError(fmt::format("{}: value type id {} is unknown; expected 0 to 12", what, type_id));
    }
    switch (static_cast<GgufValueType>(type_id)) {
      case GgufValueType::UInt8: return GgufValue(r_.read<uint8_t>(what));
      case GgufValueType::Int8: return GgufValue(r_.read<int8_t>(what));
      case GgufValueType::UInt16: return GgufValue(r_.read<uint16_t>(what));
      case GgufValueType::Int16: return GgufValue(r_.read<int16_t>(what));
      case GgufValueType::UInt32: return GgufValue(r_.read<uint32_t>(what));
      case GgufValueType::Int32: return GgufValue(r_.read<int32_t>(what));
      case GgufValueType::UInt64: return GgufValue(r_.read<uint64_t>(what));
      case GgufValueType::Int64: return GgufValue(r_.read<int64_t>(what));
      case GgufValueType::Float32: return GgufValue(r_.read<float>(what));
      case GgufValueType::Float64: return GgufValue(r_.read<double>(what));
      case GgufValueType::Bool: {
        const uint8_t b = r_.read<uint8_t>(what);
        if (b > 1) throw FormatError(fmt::format("{}: bool byte is {}; expected 0 or 1", what, b));
        return GgufValue(b == 1);
      }
      case GgufValueType::String: return GgufValue(r_.read_string(what));
      case GgufValueType::Array: return read_array(what, depth);
    }
    throw FormatError(fmt::format("{}: value type id {} is unknown", what, type_id));  // unreachable
  }

  GgufValue read_array(const std::string& what, int depth) {
    if (depth >= kMaxArrayDepth) {
      throw FormatError(fmt::format("{}: arrays nested more than {} deep", what, kMaxArrayDepth));
    }
    const uint32_t element_id = r_.read<uint32_t>(fmt::format("element type of {}", what));
    if (!is_value_type(element_id)) {
      throw FormatError(fmt::format("{}: array element type id {} is unknown; expected 0 to 12",
                                    what, element_id));
    }
    const auto element_type = static_cast<GgufValueType>(element_id);
    const uint64_t count = r_.read<uint64_t>(fmt::format("length of {}", what));
    check_count_fits(r_, count, min_value_bytes(element_type),
                     fmt::format("{}: length of the {} array", what, gguf_value_type_name(element_type)));
    array_items_ += count;
    if (array_items_ > kMaxMetadataArrayItems) {
      throw FormatError(fmt::format("{}: metadata arrays hold more than {} items in total; this "
                                    "reader accepts at most that many (real tokenizers use about "
                                    "a million)", what, kMaxMetadataArrayItems));
    }
    std::vector<GgufValue> items;
    items.reserve(count);
    const std::string item_what = fmt::format("item of {}", what);
    for (uint64_t i = 0; i < count; ++i) items.push_back(read_value(element_id, item_what, depth + 1));
    return GgufValue::array(element_type, std::move(items));
  }

  void read_alignment() {
    const GgufValue* v = f_.find("general.alignment");
    if (!v) return;
    const uint32_t alignment = v->as<uint32_t>("metadata key 'general.alignment'");
    if (!gguf::is_power_of_two(alignment)) {
      throw FormatError(fmt::format("general.alignment is {}; expected a power of two", alignment));
    }
    f_.alignment_ = alignment;
  }

  void read_tensor_infos() {
    check_count_fits(r_, tensor_count_, kMinTensorInfoBytes, "tensor count");
    f_.tensors_.reserve(tensor_count_);
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      GgufTensorInfo t;
      t.name = r_.read_string(fmt::format("name of tensor {}", i));
      const std::string what = fmt::format("tensor '{}'", t.name);
      const uint32_t n_dims = r_.read<uint32_t>(fmt::format("{}: dim count", what));
      if (n_dims == 0 || n_dims > 4) {
        throw FormatError(fmt::format("{}: {} dims; expected 1 to 4", what, n_dims));
      }
      for (uint32_t d = 0; d < n_dims; ++d)
        t.dims.push_back(r_.read<uint64_t>(fmt::format("{}: dim {}", what, d)));
      const uint32_t type_id = r_.read<uint32_t>(fmt::format("{}: type", what));
      const auto type = gguf::ggml_type_from_id(type_id);
      if (!type) throw FormatError(fmt::format("{}: ggml type id {} is unknown", what, type_id));
      t.type = *type;
      // Relative to the data section until place_tensor_data() knows where that starts.
      t.file_offset = r_.read<uint64_t>(fmt::format("{}: data offset", what));
      t.bytes = gguf::tensor_bytes(t.name, t.type, t.dims);
      t.elements = t.bytes / ggml_block_bytes(t.type) * ggml_block_elements(t.type);
      const auto [it, inserted] = f_.tensor_index_.emplace(t.name, f_.tensors_.size());
      if (!inserted) {
        throw FormatError(fmt::format("duplicate tensor name '{}' (tensors {} and {})", t.name,
                                      it->second, i));
      }
      f_.tensors_.push_back(std::move(t));
    }
  }

  void place_tensor_data() {
    // The offset is at most the file size and the alignment at most 2^31: this cannot overflow.
    f_.data_offset_ = *gguf::checked_align_up(r_.offset(), f_.alignment_);
    const uint64_t size = f_.bytes_.size();
    for (GgufTensorInfo& t : f_.tensors_) {
      const uint64_t relative = t.file_offset;
      if (relative % f_.alignment_ != 0) {
        throw FormatError(fmt::format("tensor '{}': data offset {} is not a multiple of the "
                                      "alignment {}", t.name, relative, f_.alignment_));
      }
      const auto start = gguf::checked_add(f_.data_offset_, relative);
      const auto end = start ? gguf::checked_add(*start, t.bytes) : std::nullopt;
      if (!end || *end > size) {
        const std::string where = start ? std::to_string(*start)
                                        : fmt::format("{} + {}", f_.data_offset_, relative);
        throw FormatError(fmt::format("tensor '{}': data [offset {}, {} bytes] extends past the "
                                      "end of the file ({} bytes)", t.name, where, t.bytes, size));
      }
      t.file_offset = *start;
    }
  }

  GgufFile& f_;
  ByteReader r_;
  uint64_t array_items_ = 0;  // items of every metadata array read so far
  uint64_t tensor_count_ = 0;
  uint64_t metadata_count_ = 0;
};

GgufFile::GgufFile(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes)
    : owner_(std::move(owner)), bytes_(bytes) {
  Parser(*this).run();
}

GgufFile GgufFile::open(const std::string& path) {
  auto mapped = std::make_shared<const gguf::MappedFile>(path);
  try {
    return GgufFile(mapped, mapped->bytes());
  } catch (const FormatError& e) {
    throw FormatError(fmt::format("{}: {}", path, e.what()));
  }
}

GgufFile GgufFile::parse(std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  return GgufFile(owned, std::span<const uint8_t>(*owned));
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufValue& GgufFile::at(std::string_view key) const {
  if (const GgufValue* v = find(key)) return *v;
  throw FormatError(fmt::format("metadata key '{}' is missing", key));
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(std::string_view name) const {
  if (const GgufTensorInfo* t = find_tensor(name)) return *t;
  throw FormatError(fmt::format("tensor '{}' is missing", name));
}

std::span<const uint8_t> GgufFile::tensor_data(const GgufTensorInfo& t) const {
  const auto end = gguf::checked_add(t.file_offset, t.bytes);
  if (!end || *end > bytes_.size()) {
    throw Error(fmt::format("tensor '{}': data [offset {}, {} bytes] is not inside this file ({} "
                            "bytes)", t.name, t.file_offset, t.bytes, bytes_.size()));
  }
  return bytes_.subspan(t.file_offset, t.bytes);
}

std::vector<float> GgufFile::tensor_f32(const GgufTensorInfo& t) const {
  if (!ggml_type_decodable(t.type)) {
    throw FormatError(fmt::format("tensor '{}' has type {}, which cannot be decoded; decodable: {}",
                                  t.name, ggml_type_name(t.type), gguf::decodable_type_names()));
  }
  std::vector<float> out(t.elements);
  dequantize(t.type, tensor_data(t), out);
  return out;
}

}  // namespace veloxquant
