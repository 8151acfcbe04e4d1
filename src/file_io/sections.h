// The framing every section of a VeloxQuant file shares (session files, cache files,
// calibration artifacts):
//   tag (4 ASCII bytes) | u64 payload length | payload | u64 XXH64 of tag, length and payload
// built in memory by SectionBuilder, located and verified by SectionCursor, and parsed by
// PayloadReader, which checks every read against the bytes that are there.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/xxhash64.h"
#include "veloxquant/error.h"

namespace veloxquant::file_io {

inline constexpr size_t kFramingBytes = 4 + 8 + 8;  // tag, u64 length, u64 checksum

// Checks the 12-byte header of a file image: `magic` (8 bytes, "VQCALIB\0"), then a u32 equal to
// `version`. Throws FormatError: "not a WHAT (expected the magic ...)", "format version V; this
// build reads version W only" followed by `hint`.
inline void check_header(std::span<const uint8_t> bytes, std::string_view magic, uint32_t version,
                         std::string_view what, std::string_view hint = "") {
  if (bytes.size() < 12 || std::string_view(reinterpret_cast<const char*>(bytes.data()), 8) != magic) {
    throw FormatError(fmt::format("not a {} (expected the magic '{}' in its first 8 bytes)", what,
                                  magic.substr(0, magic.find('\0'))));
  }
  uint32_t found;
  std::memcpy(&found, bytes.data() + 8, 4);
  if (found != version) {
    throw FormatError(
        fmt::format("format version {}; this build reads version {} only{}", found, version, hint));
  }
}

class SectionBuilder {
 public:
  // REQUIRES: tag.size() == 4.
  explicit SectionBuilder(std::string_view tag, size_t payload_hint = 0) : bytes_(12, 0) {
    // The tag, then the payload length (set by finish()). Sized first, then copied: GCC 12 warns
    // falsely (-Wstringop-overflow) on an insert into a vector just reserved.
    std::memcpy(bytes_.data(), tag.data(), 4);
    bytes_.reserve(kFramingBytes + payload_hint);
  }
  template <class T>
  void put(T v) {
    put_bytes({reinterpret_cast<const uint8_t*>(&v), sizeof v});
  }
  void put_bytes(std::span<const uint8_t> b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }
  template <class T>
  void put_array(std::span<const T> values) {
    put_bytes({reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes()});
  }
  void put_string(std::string_view s) {
    put(static_cast<uint32_t>(s.size()));
    put_bytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  }
  std::span<const uint8_t> finish() {
    const uint64_t payload = bytes_.size() - 12;
    std::memcpy(bytes_.data() + 4, &payload, 8);
    put(xxhash64(bytes_));
    return bytes_;
  }

 private:
  std::vector<uint8_t> bytes_;
};

// A section's payload, read front to back; every read is checked against what is left.
class PayloadReader {
 public:
  PayloadReader(std::span<const uint8_t> payload, std::string name)
      : bytes_(payload), name_(std::move(name)) {}

  std::span<const uint8_t> take(uint64_t n, std::string_view what) {
    if (n > bytes_.size() - pos_) {
      throw FormatError(fmt::format("{}: {} needs {} bytes, but only {} of the section are left", name_, what,
                                    n, bytes_.size() - pos_));
    }
    const auto out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  template <class T>
  T read(std::string_view what) {
    T v;
    std::memcpy(&v, take(sizeof v, what).data(), sizeof v);
    return v;
  }
  std::string read_string(std::string_view what) {
    const uint32_t n = read<uint32_t>(fmt::format("the length of {}", what));
    const auto b = take(n, what);
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  uint64_t left() const { return bytes_.size() - pos_; }
  void expect_end() const {
    if (left() != 0) {
      throw FormatError(
          fmt::format("{}: {} bytes are left after its last field; expected none", name_, left()));
    }
  }
  const std::string& name() const { return name_; }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
  std::string name_;
};

// The sections of a file image, in order.
class SectionCursor {
 public:
  // Where a section lies in the file: `bytes` counts its tag, length and checksum too.
  struct Located {
    std::string tag;
    uint64_t offset = 0, bytes = 0;
  };

  // The first section starts at byte `first` (after the file's header).
  SectionCursor(std::span<const uint8_t> file, uint64_t first) : file_(file), pos_(first) {}

  // The next section's payload, whose tag must be `tag`. `label` names it in messages.
  PayloadReader next(std::string_view tag, std::string label) {
    const uint64_t at = pos_, left = file_.size() - pos_;
    if (left < 12) {
      throw FormatError(
          fmt::format("the file ends at byte {} where {} was expected (truncated)", file_.size(), label));
    }
    const std::string_view found{reinterpret_cast<const char*>(file_.data() + at), 4};
    if (found != tag) {
      throw FormatError(
          fmt::format("byte {}: expected {} (tag '{}'), found tag '{}'", at, label, tag, printable(found)));
    }
    uint64_t payload;
    std::memcpy(&payload, file_.data() + at + 4, 8);
    if (left < kFramingBytes || payload > left - kFramingBytes) {
      throw FormatError(fmt::format("{} at byte {} declares {} payload bytes, but {} bytes follow "
                                    "its header; expected {} (truncated or corrupt)",
                                    label, at, payload, left - 12, payload + 8));
    }
    const auto framed = file_.subspan(at, 12 + payload);
    uint64_t stored;
    std::memcpy(&stored, file_.data() + at + 12 + payload, 8);
    const uint64_t computed = xxhash64(framed);
    if (stored != computed) {
      throw FormatError(fmt::format("{} at byte {} is corrupt: its XXH64 is 0x{:016x}, the file "
                                    "records 0x{:016x}",
                                    label, at, computed, stored));
    }
    pos_ = at + kFramingBytes + payload;
    located_.push_back({std::string(tag), at, kFramingBytes + payload});
    return PayloadReader(framed.subspan(12), std::move(label));
  }

  // Whether every byte of the file has been read as sections.
  bool at_end() const { return pos_ == file_.size(); }

  // The sections read so far, in order.
  const std::vector<Located>& located() const { return located_; }

  // `last` names the last section in the message ("the last layer").
  void expect_end(std::string_view last) const {
    if (pos_ != file_.size()) {
      throw FormatError(fmt::format("{} unexpected bytes follow {} at byte {}; expected the file "
                                    "to end there",
                                    file_.size() - pos_, last, pos_));
    }
  }

 private:
  static std::string printable(std::string_view s) {
    std::string out;
    for (char c : s)
      out += c >= 0x20 && c < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", static_cast<uint8_t>(c));
    return out;
  }

  std::span<const uint8_t> file_;
  std::vector<Located> located_;
  uint64_t pos_;
};

}  // namespace veloxquant::file_io
