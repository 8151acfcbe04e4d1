#include "file_io/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "veloxquant/error.h"

namespace veloxquant::file_io {
namespace {

[[noreturn]] void fail(std::string_view what, const std::string& path) {
  throw Error(fmt::format("{} '{}' failed: {}", what, path, std::strerror(errno)));
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), temp_(path_ + ".tmp-XXXXXX") {
  std::vector<char> name(temp_.begin(), temp_.end());
  name.push_back('\0');
  fd_ = ::mkstemp(name.data());
  if (fd_ < 0) fail("creating a temporary file", temp_);
  temp_ = name.data();
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temp_.c_str());
}

void AtomicFile::write(std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("writing", temp_);
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) fail("fsync of", temp_);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    ::unlink(temp_.c_str());
    fail("closing", temp_);
  }
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_.c_str());
    errno = err;
    fail(fmt::format("renaming '{}' to", temp_), path_);
  }
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  if (dir.empty()) dir = ".";
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd < 0) fail("opening the directory", dir.string());
  const bool synced = ::fsync(dir_fd) == 0;
  ::close(dir_fd);
  if (!synced) fail("fsync of the directory", dir.string());
}

}  // namespace veloxquant::file_io
