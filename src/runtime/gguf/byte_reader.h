// Sequential little-endian reads from a byte range; every read is checked against the bytes left,
// so a truncated or lying file ends in a FormatError, never a read past the end.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace veloxquant::gguf {

// GGUF v2/v3 as read here is little-endian, and values are copied straight from the bytes.
static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

class ByteReader {
 public:
  explicit ByteReader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t offset() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  // Throws FormatError naming `what` unless n more bytes are there.
  void require(uint64_t n, std::string_view what) const;

  template <class T>
  T read(std::string_view what) {
    require(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A uint64 length followed by that many bytes; the length is checked before anything is
  // allocated.
  std::string read_string(std::string_view what);

 private:
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

}  // namespace veloxquant::gguf
