// The shared real model and edited copies of it, for runtime tests.
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "veloxquant/gguf.h"

namespace veloxquant::test {

inline std::string stories_path() { return VELOXQUANT_SHARED_DIR "/models/stories260K.gguf"; }

// Karpathy's documented temperature-0 sample of stories260K after "Once upon a time" (see
// shared/models/SOURCES.md).
constexpr const char* kStoriesDocumentedSample =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she "
    "saw a big, red ball. She wanted to play with it, but it was too high";

// A GGUF file's contents in editable form.
struct GgufContents {
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<uint64_t> dims;
    std::vector<uint8_t> data;
  };
  std::vector<std::pair<std::string, GgufValue>> metadata;
  std::vector<Tensor> tensors;

  explicit GgufContents(const GgufFile& f) : metadata(f.metadata()) {
    for (const auto& t : f.tensors()) {
      const auto d = f.tensor_data(t);
      tensors.push_back({t.name, t.type, t.dims, {d.begin(), d.end()}});
    }
  }
  void set(const std::string& key, GgufValue v) {
    for (auto& [k, old] : metadata)
      if (k == key) return void(old = std::move(v));
    metadata.emplace_back(key, std::move(v));
  }
  void erase(const std::string& key) {
    std::erase_if(metadata, [&](const auto& kv) { return kv.first == key; });
  }
  void erase_tensor(const std::string& name) {
    std::erase_if(tensors, [&](const Tensor& t) { return t.name == name; });
  }
  GgufFile build() const {
    GgufWriter w;
    for (const auto& [k, v] : metadata) w.add_metadata(k, v);
    for (const auto& t : tensors) w.add_tensor(t.name, t.type, t.dims, t.data);
    return GgufFile::parse(w.to_bytes());
  }
};

}  // namespace veloxquant::test
