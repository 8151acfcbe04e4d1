// A whole file mapped read-only into memory (POSIX mmap); unmapped and closed on destruction.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace veloxquant::gguf {

class MappedFile {
 public:
  // Throws Error naming the path and the system's reason if it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace veloxquant::gguf
