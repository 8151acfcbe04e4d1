// Replacing a file so that a crash at any moment leaves either the old contents or the new ones:
// write a temporary file beside the target, fsync it, rename it over the target, fsync the
// directory (so the rename itself survives a power loss).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace veloxquant::file_io {

class AtomicFile {
 public:
  // Creates "PATH.tmp-XXXXXX" (mkstemp) in PATH's directory. Throws Error naming it on failure.
  explicit AtomicFile(std::string path);
  // Without commit(), removes the temporary file; PATH keeps what it held.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::span<const uint8_t> bytes);
  // fsync, close, rename over PATH, fsync PATH's directory.
  void commit();

 private:
  std::string path_, temp_;
  int fd_ = -1;
};

}  // namespace veloxquant::file_io
