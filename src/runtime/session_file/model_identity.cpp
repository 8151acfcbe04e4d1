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

// A canonical byte encoding of tensor descriptions, hashed once built.
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
  // The tokenizer entries in GGUF's own encoding (key, type tag, value), as the writer lays them.
  GgufWriter tokenizer;
  for (const auto& [key, value] : file.metadata()) {
    if (key.starts_with("tokenizer.")) tokenizer.add_metadata(key, value);
  }
  id.tokenizer_hash = xxhash64(tokenizer.to_bytes());
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
