// A model's identity for session files: shapes from its config, plus hashes of what else decides
// its caches' contents (the weights, found through their metadata, and the tokenizer).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/xxhash64.h"
#include "veloxquant/session_file.h"

namespace veloxquant {
namespace {

// Bytes of each tensor's data mixed into the weights hash: enough to tell checkpoints apart,
// little enough that hashing touches one page per tensor.
constexpr size_t kTensorSampleBytes = 64;

// A canonical byte encoding of metadata and tensor descriptions, hashed once built.
class HashInput {
 public:
  template <class T>
  void put(T v) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof v);
    std::memcpy(bytes_.data() + at, &v, sizeof v);
  }
  void put_bytes(std::span<const uint8_t> b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    put_bytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  }

  void put_value(const GgufValue& v) {
    put(static_cast<uint32_t>(v.type()));
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

  uint64_t hash() const { return xxhash64(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace

ModelIdentity ModelIdentity::of(const Model& model) {
  const ModelConfig& c = model.config();
  const GgufFile& file = model.file();
  ModelIdentity id{c.architecture, c.layers, c.heads, c.kv_heads, c.head_dim, c.embedding,
                   c.feed_forward, c.vocab, c.context_length};
  HashInput weights;
  for (const GgufTensorInfo& t : file.tensors()) {
    weights.put_string(t.name);
    weights.put(static_cast<uint32_t>(t.type));
    weights.put<uint64_t>(t.dims.size());
    for (uint64_t d : t.dims) weights.put(d);
    weights.put(t.file_offset);
    const std::span<const uint8_t> data = file.tensor_data(t);
    weights.put_bytes(data.first(std::min(data.size(), kTensorSampleBytes)));
  }
  id.weights_hash = weights.hash();
  HashInput tokenizer;
  for (const auto& [key, value] : file.metadata()) {
    if (!key.starts_with("tokenizer.")) continue;
    tokenizer.put_string(key);
    tokenizer.put_value(value);
  }
  id.tokenizer_hash = tokenizer.hash();
  return id;
}

std::string describe_differences(const ModelIdentity& expected, const ModelIdentity& found) {
  std::string out;
  const auto add = [&](std::string_view field, const auto& e, const auto& f) {
    if (e == f) return;
    out += fmt::format("{}{}: expected {}, found {}", out.empty() ? "" : "; ", field, e, f);
  };
  const auto hex = [](uint64_t h) { return fmt::format("0x{:016x}", h); };
  add("architecture", fmt::format("'{}'", expected.architecture), fmt::format("'{}'", found.architecture));
  add("layers", expected.layers, found.layers);
  add("heads", expected.heads, found.heads);
  add("kv_heads", expected.kv_heads, found.kv_heads);
  add("head_dim", expected.head_dim, found.head_dim);
  add("embedding", expected.embedding, found.embedding);
  add("feed_forward", expected.feed_forward, found.feed_forward);
  add("vocab", expected.vocab, found.vocab);
  add("context_length", expected.context_length, found.context_length);
  add("weights hash", hex(expected.weights_hash), hex(found.weights_hash));
  add("tokenizer hash", hex(expected.tokenizer_hash), hex(found.tokenizer_hash));
  return out;
}

}  // namespace veloxquant
