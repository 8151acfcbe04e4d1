#include "npy.h"

#include <bit>
#include <cstring>
#include <fstream>

#include "veloxquant/error.h"

namespace veloxquant::dev {

std::vector<char> npy_f32(std::span<const float> data, std::span<const size_t> shape) {
  static_assert(std::endian::native == std::endian::little, "'<f4' is written as stored");
  size_t count = 1;
  std::string dims;
  for (size_t d : shape) {
    count *= d;
    dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  }
  if (shape.size() == 1) dims += ',';  // a Python 1-tuple: "(5,)"
  if (count != data.size())
    throw Error("npy: shape holds " + std::to_string(count) + " elements, data has " +
                std::to_string(data.size()));
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // The format pads the header with spaces and a newline so the data starts 64-byte aligned.
  const size_t preamble = 10;  // magic (6), version (2), header length (2)
  header.append(63 - (preamble + header.size()) % 64, ' ');
  header += '\n';
  std::vector<char> out(preamble + header.size() + data.size_bytes());
  std::memcpy(out.data(), "\x93NUMPY\x01\x00", 8);
  out[8] = static_cast<char>(header.size() & 0xFF);
  out[9] = static_cast<char>(header.size() >> 8);
  std::memcpy(out.data() + preamble, header.data(), header.size());
  if (!data.empty()) std::memcpy(out.data() + preamble + header.size(), data.data(), data.size_bytes());
  return out;
}

void write_npy_f32(const std::string& path, std::span<const float> data,
                   std::span<const size_t> shape) {
  const std::vector<char> bytes = npy_f32(data, shape);
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f.flush()) throw Error("npy: cannot write " + path);
}

}  // namespace veloxquant::dev
