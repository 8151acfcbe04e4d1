#include "npy.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>

#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

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

namespace {

// The value of `key` in the header's Python dict literal, up to the next top-level comma.
std::string header_field(const std::string& header, const std::string& key, const std::string& path) {
  const size_t at = header.find("'" + key + "':");
  if (at == std::string::npos) throw Error("npy: " + path + ": header has no '" + key + "'");
  size_t begin = header.find_first_not_of(' ', at + key.size() + 3);
  size_t end = header[begin] == '(' ? header.find(')', begin) + 1 : header.find(',', begin);
  if (begin == std::string::npos || end == std::string::npos || end < begin)
    throw Error("npy: " + path + ": malformed header field '" + key + "'");
  return header.substr(begin, end - begin);
}

std::vector<size_t> parse_shape(const std::string& tuple, const std::string& path) {
  std::vector<size_t> shape;
  size_t i = 1;  // past '('
  while (i < tuple.size()) {
    while (i < tuple.size() && (tuple[i] == ' ' || tuple[i] == ',')) ++i;
    if (i >= tuple.size() || tuple[i] == ')') break;
    size_t used = 0;
    try {
      shape.push_back(std::stoull(tuple.substr(i), &used));
    } catch (const std::exception&) {
      throw Error("npy: " + path + ": malformed shape " + tuple);
    }
    i += used;
  }
  return shape;
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("npy: cannot open " + path);
  const std::string bytes(std::istreambuf_iterator<char>(f), {});
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0 || bytes[6] != 1)
    throw Error("npy: " + path + " is not a version 1.0 .npy file");
  const size_t header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
  if (10 + header_len > bytes.size()) throw Error("npy: " + path + ": header runs past the file");
  const std::string header = bytes.substr(10, header_len);
  const std::string descr = header_field(header, "descr", path);
  if (header_field(header, "fortran_order", path) != "False")
    throw Error("npy: " + path + ": Fortran-order arrays are not supported");
  const size_t width = descr == "'<f4'" ? 4 : descr == "'<f2'" ? 2 : 0;
  if (width == 0) throw Error("npy: " + path + ": dtype " + descr + "; expected '<f2' or '<f4'");
  NpyArray a;
  a.shape = parse_shape(header_field(header, "shape", path), path);
  size_t count = 1;
  for (size_t d : a.shape) count *= d;
  const char* data = bytes.data() + 10 + header_len;
  if (bytes.size() - 10 - header_len != count * width)
    throw Error("npy: " + path + ": " + std::to_string(bytes.size() - 10 - header_len) +
                " data bytes; the shape needs " + std::to_string(count * width));
  a.data.resize(count);
  for (size_t i = 0; i < count; ++i) {
    if (width == 4) {
      std::memcpy(&a.data[i], data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      a.data[i] = f16_to_f32(h);
    }
  }
  return a;
}

}  // namespace veloxquant::dev
