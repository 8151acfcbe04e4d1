#include "runtime/perplexity/logprob_file.h"

#include <array>
#include <cstring>
#include <filesystem>

#include "veloxquant/error.h"

namespace veloxquant::runtime {
namespace {

constexpr char kMagic[8] = {'V', 'Q', 'L', 'O', 'G', 'P', 'R', 'B'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 8 + 6 * 4 + 8;

std::array<uint8_t, kHeaderBytes> encode(const LogprobHeader& h) {
  std::array<uint8_t, kHeaderBytes> b{};
  std::memcpy(b.data(), kMagic, 8);
  const uint32_t fields[6] = {kVersion, h.vocab, h.context, h.chunks, h.scored, 0};
  std::memcpy(b.data() + 8, fields, sizeof fields);  // the project targets little-endian hosts
  std::memcpy(b.data() + 32, &h.token_hash, 8);
  return b;
}

uint64_t payload_floats(const LogprobHeader& h) {
  return uint64_t{h.chunks} * h.scored * h.vocab;
}

}  // namespace

uint64_t fnv1a(std::span<const int32_t> tokens, uint64_t h) {
  for (int32_t t : tokens) {
    uint32_t u;
    std::memcpy(&u, &t, 4);
    for (int i = 0; i < 4; ++i) {
      h ^= (u >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  return h;
}

LogprobWriter::LogprobWriter(const std::string& path, const LogprobHeader& header)
    : path_(path), tmp_(path + ".tmp"), f_(std::fopen(tmp_.c_str(), "wb"), &std::fclose),
      remaining_(payload_floats(header)) {
  if (!f_) throw Error("cannot write the baseline file '" + tmp_ + "': " + std::strerror(errno));
  const auto h = encode(header);
  if (std::fwrite(h.data(), 1, h.size(), f_.get()) != h.size())
    throw Error("writing '" + tmp_ + "' failed: " + std::strerror(errno));
}

LogprobWriter::~LogprobWriter() {
  if (f_) {  // not finished: drop the partial file, keep whatever PATH held before
    f_.reset();
    std::remove(tmp_.c_str());
  }
}

void LogprobWriter::write(std::span<const float> logprobs) {
  if (logprobs.size() > remaining_) throw Error("baseline writer: more rows than its header says");
  if (std::fwrite(logprobs.data(), sizeof(float), logprobs.size(), f_.get()) != logprobs.size())
    throw Error("writing '" + tmp_ + "' failed: " + std::strerror(errno));
  remaining_ -= logprobs.size();
}

void LogprobWriter::finish() {
  if (remaining_ != 0) throw Error("baseline writer: finished with rows missing");
  if (std::fflush(f_.get()) != 0 || std::fclose(f_.release()) != 0)
    throw Error("writing '" + tmp_ + "' failed: " + std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) throw Error("cannot move '" + tmp_ + "' to '" + path_ + "': " + ec.message());
}

LogprobReader::LogprobReader(const std::string& path, const LogprobHeader& expected)
    : path_(path), f_(std::fopen(path.c_str(), "rb"), &std::fclose) {
  if (!f_) throw Error("cannot read the baseline file '" + path + "': " + std::strerror(errno));
  std::array<uint8_t, kHeaderBytes> b{};
  if (std::fread(b.data(), 1, b.size(), f_.get()) != b.size() || std::memcmp(b.data(), kMagic, 8) != 0)
    throw Error("'" + path + "' is not a baseline written by perplexity --save-kl-base");
  uint32_t fields[6];
  std::memcpy(fields, b.data() + 8, sizeof fields);
  if (fields[0] != kVersion)
    throw Error("'" + path + "' has baseline format version " + std::to_string(fields[0]) +
                "; expected " + std::to_string(kVersion));
  LogprobHeader got{fields[1], fields[2], fields[3], fields[4], 0};
  std::memcpy(&got.token_hash, b.data() + 32, 8);
  const auto mismatch = [&](const char* what, uint64_t have, uint64_t want) {
    throw Error("'" + path + "' was written with " + what + " " + std::to_string(have) +
                "; this run has " + std::to_string(want));
  };
  if (got.vocab != expected.vocab) mismatch("vocabulary size", got.vocab, expected.vocab);
  if (got.context != expected.context) mismatch("context", got.context, expected.context);
  if (got.chunks != expected.chunks) mismatch("chunk count", got.chunks, expected.chunks);
  if (got.scored != expected.scored) mismatch("scored positions per chunk", got.scored, expected.scored);
  if (got.token_hash != expected.token_hash)
    throw Error("'" + path + "' was written for other tokens (another text or tokenizer)");
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  const uint64_t want = kHeaderBytes + payload_floats(got) * sizeof(float);
  if (ec || size != want)
    throw Error("'" + path + "' holds " + std::to_string(size) + " bytes; its header implies " +
                std::to_string(want) + " (truncated or corrupt)");
}

void LogprobReader::read(std::span<float> logprobs) {
  if (std::fread(logprobs.data(), sizeof(float), logprobs.size(), f_.get()) != logprobs.size())
    throw Error("reading '" + path_ + "' failed: the file ended early");
}

}  // namespace veloxquant::runtime
