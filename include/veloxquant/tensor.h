// Tensor views over f32 / f16 / bf16 data and exact scalar conversions between them.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace veloxquant {

enum class DType : uint8_t { F32, F16, BF16 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);

// IEEE binary16 <-> binary32. f32_to_f16 rounds to nearest even, saturates to +-inf on overflow,
// keeps NaN a NaN; f16_to_f32 is exact (every half is a float). f16_to_f32 is inline: the weight
// kernels convert a block scale per 32 weights.
uint16_t f32_to_f16(float x);
inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: value = mant * 2^-24, exact in f32
      const float f = static_cast<float>(mant) * 0x1p-24f;
      bits = sign | std::bit_cast<uint32_t>(f);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}
// bfloat16 <-> binary32: round to nearest even; bf16_to_f32 is exact.
uint16_t f32_to_bf16(float x);
float bf16_to_f32(uint16_t h);

// Bulk conversions (SIMD where available).
void f16_to_f32(const uint16_t* in, float* out, size_t n);
void f32_to_f16(const float* in, uint16_t* out, size_t n);

// A non-owning view of a dense, row-major tensor of up to 4 dimensions.
struct TensorView {
  const void* data = nullptr;
  DType dtype = DType::F32;
  std::array<size_t, 4> shape{};
  int rank = 0;

  static TensorView f32(const float* p, std::initializer_list<size_t> dims);
  static TensorView f16(const uint16_t* p, std::initializer_list<size_t> dims);
  static TensorView of(const void* p, DType t, std::initializer_list<size_t> dims);

  size_t numel() const;
  size_t dim(int i) const { return shape[static_cast<size_t>(i)]; }
  std::string shape_string() const;  // "[4, 2, 128] f16"
  // Copies all elements into out (numel floats), converting exactly to f32.
  void to_f32(float* out) const;
};

// Converts a view to an owned f32 vector; throws ShapeError naming `what` if any value is NaN/Inf.
std::vector<float> to_f32_checked(const TensorView& t, const char* what);

}  // namespace veloxquant
