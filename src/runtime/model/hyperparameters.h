// Reads a model's hyperparameters from GGUF metadata ("<arch>.block_count", ...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/model/architecture.h"
#include "veloxquant/model.h"

namespace veloxquant::runtime {

// The metadata keys of one architecture ("<arch>." + key), each read with a FormatError naming
// the key when it is mistyped or out of range.
class MetadataReader {
 public:
  MetadataReader(const GgufFile& f, std::string_view arch) : f_(f), prefix_(std::string(arch) + ".") {}

  // A count in [lo, hi]; `fallback` when absent (required when it is negative).
  uint32_t count(const std::string& key, int64_t lo, int64_t hi, int64_t fallback = -1) const;
  // One count per layer in [lo, hi], from an array of `layers` of them or one for every layer;
  // `fallback` for every layer when absent (required when it is negative).
  std::vector<uint32_t> per_layer(const std::string& key, uint32_t layers, int64_t lo, int64_t hi,
                                  int64_t fallback = -1) const;
  // A positive finite number, `fallback` when absent.
  float number(const std::string& key, float fallback) const;
  const GgufValue* find(const std::string& key) const { return f_.find(prefix_ + key); }
  std::string full(const std::string& key) const { return prefix_ + key; }
  const GgufFile& file() const { return f_; }

 private:
  const GgufFile& f_;
  std::string prefix_;
};

// Throws FormatError naming the key for a missing, mistyped or out-of-range value, and for
// features the runtime does not implement (e.g. LongRoPE scaling).
ModelConfig read_hyperparameters(const GgufFile& file, const Architecture& arch);

// Sliding-window attention as llama.cpp's gemma2/gemma3 read it: `attention.sliding_window`
// (default `window`; 0 or absent with no default: no windowed layer) and
// `attention.sliding_window_pattern`, either one flag per layer or a period n whose last layer
// of every n is global (default `pattern`); `rope.freq_base_swa` for the windowed layers' RoPE
// (default 10000, unscaled), or the global RoPE when `same_rope`.
void read_sliding_window(const MetadataReader& r, ModelConfig& c, uint32_t window, uint32_t pattern,
                         bool same_rope);

}  // namespace veloxquant::runtime
