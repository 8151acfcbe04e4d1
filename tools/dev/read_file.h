// A whole file as a string, for the developer and training tools that read texts, templates and
// JSON: one read, an Error naming the path when it cannot be opened.
#pragma once

#include <fstream>
#include <iterator>
#include <string>

#include "veloxquant/error.h"

namespace veloxquant::dev {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "' for reading");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace veloxquant::dev
