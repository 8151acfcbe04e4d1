#include "runtime/gguf/byte_reader.h"

#include <fmt/core.h>

#include "veloxquant/gguf.h"

namespace veloxquant::gguf {

void ByteReader::require(uint64_t n, std::string_view what) const {
  if (n > remaining()) {
    throw FormatError(fmt::format("{}: needs {} bytes at offset {}, but the file ends at {} bytes",
                                  what, n, pos_, bytes_.size()));
  }
}

std::string ByteReader::read_string(std::string_view what) {
  const uint64_t length = read<uint64_t>(fmt::format("length of {}", what));
  require(length, what);
  std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
  pos_ += length;
  return s;
}

}  // namespace veloxquant::gguf
