#include "file_io/read_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "veloxquant/error.h"

namespace veloxquant::file_io {

std::vector<uint8_t> read_file(const std::string& path) {
  if (path.find('\0') != std::string::npos) throw Error("its path holds a NUL byte; expected a file name");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("it is a directory; expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open it: {}", std::strerror(errno)));
  try {
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  } catch (const std::ios_base::failure& e) {
    // libstdc++'s file buffer throws on a failed read whatever the stream's exception mask.
    throw Error(fmt::format("reading it failed: {}", e.what()));
  }
}

std::string shown_path(const std::string& path) {
  std::string out;
  for (char c : path) out += c == '\0' ? std::string("\\0") : std::string(1, c);
  return out;
}

}  // namespace veloxquant::file_io
