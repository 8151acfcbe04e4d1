// What a model's KV caches depend on besides the method, recorded by every file that holds
// state fitted to one model (session files, calibration artifacts): equal identities, equal
// caches. Session files compute it from a loaded model (session_file.h, model_identity()).
#pragma once

#include <cstdint>
#include <string>

namespace veloxquant {

struct ModelIdentity {
  std::string architecture;
  uint32_t layers = 0, heads = 0, kv_heads = 0, head_dim = 0, embedding = 0, feed_forward = 0, vocab = 0,
           context_length = 0;
  // XXH64 of every tensor's name, type, dims, file offset and first 64 data bytes (so that two
  // checkpoints of one architecture differ without hashing gigabytes of weights).
  uint64_t weights_hash = 0;
  // XXH64 of every tokenizer.* metadata entry (key, type and value).
  uint64_t tokenizer_hash = 0;

  bool operator==(const ModelIdentity&) const = default;
};

// "layers: expected 5, found 2; weights hash: expected 0x..., found 0x..." naming every field
// that differs; "" when the identities are equal.
std::string describe_differences(const ModelIdentity& expected, const ModelIdentity& found);

}  // namespace veloxquant
