// The .npy reader the model exporter uses: float32 and float16 arrays, and clear errors.
#include "dev/npy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "expect_error.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant::dev {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + ".npy"))
      .string();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A version 1.0 header for `dict`, padded as NumPy pads it.
std::string npy_header(std::string dict) {
  dict.append(63 - (10 + dict.size()) % 64, ' ');
  dict += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict;
}

TEST(Npy, ReadsWhatItWrites) {
  const std::string path = temp_path("npy-f32");
  const std::vector<float> data = {1.5f, -2.0f, 3.25f, 0.0f, 1e-8f, -7.0f};
  const std::vector<size_t> shape = {2, 3};
  write_npy_f32(path, data, shape);
  const NpyArray a = read_npy(path);
  EXPECT_EQ(a.shape, shape);
  EXPECT_EQ(a.data, data);
  std::filesystem::remove(path);
}

TEST(Npy, WidensFloat16) {
  const std::string path = temp_path("npy-f16");
  std::string bytes = npy_header("{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }");
  for (float v : {0.5f, -1.25f, 65504.0f}) {
    const uint16_t h = f32_to_f16(v);
    bytes.append(reinterpret_cast<const char*>(&h), 2);
  }
  write_bytes(path, bytes);
  const NpyArray a = read_npy(path);
  EXPECT_EQ(a.shape, std::vector<size_t>{3});
  EXPECT_EQ(a.data, (std::vector<float>{0.5f, -1.25f, 65504.0f}));
  std::filesystem::remove(path);
}

TEST(Npy, RejectsOtherDtypesOrdersAndSizes) {
  const std::string path = temp_path("npy-bad");
  write_bytes(path, npy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }") +
                        std::string(8, '\0'));
  EXPECT_CONTAINS(test::error_message<Error>([&] { read_npy(path); }),
                  "dtype '<i8'; expected '<f2' or '<f4'");
  write_bytes(path, npy_header("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }") +
                        std::string(4, '\0'));
  EXPECT_CONTAINS(test::error_message<Error>([&] { read_npy(path); }), "Fortran-order");
  write_bytes(path, npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }") +
                        std::string(12, '\0'));
  EXPECT_CONTAINS(test::error_message<Error>([&] { read_npy(path); }),
                  "12 data bytes; the shape needs 16");
  write_bytes(path, "not numpy");
  EXPECT_CONTAINS(test::error_message<Error>([&] { read_npy(path); }), "is not a version 1.0 .npy file");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace veloxquant::dev
