// GGUF v3 serialization: header, metadata, tensor infos, then the data section with every tensor
// starting on the alignment, as the reader (and ggml) expect.
#include <fmt/format.h>

#include <cstring>
#include <fstream>

#include "runtime/gguf/checked_math.h"
#include "runtime/gguf/ggml_types.h"
#include "veloxquant/gguf.h"

namespace veloxquant {
namespace {

class ByteWriter {
 public:
  template <class T>
  void put(T v) {
    append(&v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    append(s.data(), s.size());
  }
  void put_bytes(const std::vector<uint8_t>& b) { append(b.data(), b.size()); }
  void pad_to(uint64_t alignment) {
    out_.resize(*gguf::checked_align_up(out_.size(), alignment), 0);
  }

  // Writes the value without its type tag (arrays carry their element type inline).
  void put_value(const GgufValue& v) {
    switch (v.type()) {
      case GgufValueType::UInt8: return put(v.as<uint8_t>(""));
      case GgufValueType::Int8: return put(v.as<int8_t>(""));
      case GgufValueType::UInt16: return put(v.as<uint16_t>(""));
      case GgufValueType::Int16: return put(v.as<int16_t>(""));
      case GgufValueType::UInt32: return put(v.as<uint32_t>(""));
      case GgufValueType::Int32: return put(v.as<int32_t>(""));
      case GgufValueType::UInt64: return put(v.as<uint64_t>(""));
      case GgufValueType::Int64: return put(v.as<int64_t>(""));
      case GgufValueType::Float32: return put(v.as<float>(""));
      case GgufValueType::Float64: return put(v.as<double>(""));
      case GgufValueType::Bool: return put<uint8_t>(v.as<bool>("") ? 1 : 0);
      case GgufValueType::String: return put_string(v.as<std::string>(""));
      case GgufValueType::Array: {
        const auto& a = v.as<GgufValue::Array>("");
        put(static_cast<uint32_t>(a.element_type));
        put<uint64_t>(a.items.size());
        for (const GgufValue& item : a.items) put_value(item);
        return;
      }
    }
  }

  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  // resize + memcpy rather than vector::insert: GCC 12 reports a false stringop-overflow on the
  // inlined insert of a few bytes.
  void append(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = out_.size();
    out_.resize(at + n);
    std::memcpy(out_.data() + at, p, n);
  }

  std::vector<uint8_t> out_;
};

}  // namespace

void GgufWriter::add_metadata(std::string key, GgufValue value) {
  for (const auto& [k, v] : metadata_)
    if (k == key) throw Error(fmt::format("GGUF writer: duplicate metadata key '{}'", key));
  if (key == "general.alignment") {
    const uint32_t alignment = value.as<uint32_t>("metadata key 'general.alignment'");
    if (!gguf::is_power_of_two(alignment)) {
      throw Error(fmt::format("GGUF writer: general.alignment is {}; expected a power of two",
                              alignment));
    }
    alignment_ = alignment;
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::add_tensor(std::string name, GgmlType type, std::vector<uint64_t> dims,
                            std::vector<uint8_t> data) {
  for (const Tensor& t : tensors_)
    if (t.name == name) throw Error(fmt::format("GGUF writer: duplicate tensor name '{}'", name));
  const uint64_t bytes = gguf::tensor_bytes(name, type, dims);
  if (data.size() != bytes) {
    throw Error(fmt::format("GGUF writer: tensor '{}' has {} bytes of data; expected {} for {} {}",
                            name, data.size(), bytes, ggml_type_name(type),
                            fmt::join(dims, "x")));
  }
  tensors_.push_back({std::move(name), type, std::move(dims), std::move(data)});
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  ByteWriter w;
  w.put<uint32_t>(0x46554747);  // "GGUF" read as a little-endian uint32
  w.put<uint32_t>(3);
  w.put<uint64_t>(tensors_.size());
  w.put<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    w.put_string(key);
    w.put(static_cast<uint32_t>(value.type()));
    w.put_value(value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    w.put_string(t.name);
    w.put<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) w.put(d);
    w.put(static_cast<uint32_t>(t.type));
    w.put(offset);
    offset = *gguf::checked_align_up(offset + t.data.size(), alignment_);
  }
  w.pad_to(alignment_);
  for (const Tensor& t : tensors_) {
    w.put_bytes(t.data);
    w.pad_to(alignment_);
  }
  return w.take();
}

void GgufWriter::write_file(const std::string& path) const {
  const std::vector<uint8_t> bytes = to_bytes();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw Error(fmt::format("GGUF writer: cannot write '{}'", path));
}

}  // namespace veloxquant
