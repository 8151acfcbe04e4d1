// Reading a whole file of one of the project's formats (session, cache, calibration and
// precomputed-table files) before its parser checks it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace veloxquant::file_io {

// The file's bytes. Throws Error saying why when the path holds a NUL byte (the system would read
// a shorter path), names a directory, cannot be opened (the system's reason) or cannot be read;
// the message does not repeat the path, which callers name with what the file is for.
std::vector<uint8_t> read_file(const std::string& path);

// The path as a message shows it: NUL bytes written as \0, so that the message is not cut there.
std::string shown_path(const std::string& path);

}  // namespace veloxquant::file_io
