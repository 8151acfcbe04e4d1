// The baseline file of `perplexity --save-kl-base`: the log-probabilities (f32, full vocabulary)
// of every scored position, with a header that ties it to the tokens and settings it came from.
//   "VQLOGPRB" | u32 version = 1 | u32 vocab | u32 context | u32 chunks | u32 scored per chunk
//   | u32 0 | u64 FNV-1a of the evaluated token ids | chunks * scored * vocab f32 (little-endian)
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

namespace veloxquant::runtime {

struct LogprobHeader {
  uint32_t vocab = 0, context = 0, chunks = 0, scored = 0;
  uint64_t token_hash = 0;
  bool operator==(const LogprobHeader&) const = default;
};

uint64_t fnv1a(std::span<const int32_t> tokens, uint64_t h = 0xcbf29ce484222325ull);

// Writes to PATH.tmp and renames it over PATH on finish(), so an interrupted run never leaves a
// truncated baseline under the real name.
class LogprobWriter {
 public:
  LogprobWriter(const std::string& path, const LogprobHeader& header);
  ~LogprobWriter();
  void write(std::span<const float> logprobs);
  void finish();

 private:
  std::string path_, tmp_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f_;
  uint64_t remaining_;
};

class LogprobReader {
 public:
  // Throws Error naming the path when it cannot be read, is not such a file, has another size
  // than its header implies, or its header differs from `expected` (the message says how).
  LogprobReader(const std::string& path, const LogprobHeader& expected);
  void read(std::span<float> logprobs);

 private:
  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f_;
};

}  // namespace veloxquant::runtime
