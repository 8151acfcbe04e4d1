// A model's identity for session files: shapes from its config, plus hashes of what else decides
// its caches' contents (the weights, found through their metadata, and the tokenizer).
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

ModelIdentity model_identity(const Model& model) {
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

}  // namespace veloxquant
