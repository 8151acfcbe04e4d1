#include "veloxquant/tensor.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <sstream>

#include "veloxquant/error.h"

namespace veloxquant {

size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

uint16_t f32_to_f16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or NaN; keep NaN quiet and non-zero
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    // Add 0.5 as the magic number so the FPU rounds the mantissa to nearest even for us.
    const float magic = std::bit_cast<float>(0x3f000000u);  // 0.5
    const float r = std::bit_cast<float>(abs) + magic;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(r) - 0x3f000000u));
  }
  const uint32_t mant_odd = (abs >> 13) & 1u;
  uint32_t v = abs + 0xc8000fffu + mant_odd;  // rebias exponent (-112 << 23) and round to even
  return static_cast<uint16_t>(sign | (v >> 13));
}

uint16_t f32_to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

TensorView TensorView::of(const void* p, DType t, std::initializer_list<size_t> dims) {
  if (dims.size() == 0 || dims.size() > 4) {
    throw ShapeError("tensor rank " + std::to_string(dims.size()) + " unsupported; expected 1..4");
  }
  TensorView v;
  v.data = p;
  v.dtype = t;
  v.rank = static_cast<int>(dims.size());
  size_t i = 0;
  for (size_t d : dims) v.shape[i++] = d;
  return v;
}

TensorView TensorView::f32(const float* p, std::initializer_list<size_t> dims) {
  return of(p, DType::F32, dims);
}

TensorView TensorView::f16(const uint16_t* p, std::initializer_list<size_t> dims) {
  return of(p, DType::F16, dims);
}

size_t TensorView::numel() const {
  if (rank == 0) return 0;
  size_t n = 1;
  for (int i = 0; i < rank; ++i) n *= shape[static_cast<size_t>(i)];
  return n;
}

std::string TensorView::shape_string() const {
  std::ostringstream s;
  s << '[';
  for (int i = 0; i < rank; ++i) s << (i ? ", " : "") << shape[static_cast<size_t>(i)];
  s << "] " << dtype_name(dtype);
  return s.str();
}

void TensorView::to_f32(float* out) const {
  const size_t n = numel();
  switch (dtype) {
    case DType::F32:
      std::memcpy(out, data, n * sizeof(float));
      break;
    case DType::F16:
      veloxquant::f16_to_f32(static_cast<const uint16_t*>(data), out, n);
      break;
    case DType::BF16: {
      const auto* p = static_cast<const uint16_t*>(data);
      for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(p[i]);
      break;
    }
  }
}

std::vector<float> to_f32_checked(const TensorView& t, const char* what) {
  if (t.data == nullptr && t.numel() > 0) throw ShapeError(std::string(what) + " has no data");
  std::vector<float> out(t.numel());
  t.to_f32(out.data());
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      throw ShapeError(std::string(what) + " " + t.shape_string() + " holds a non-finite value (" +
                       std::to_string(out[i]) + ") at flat index " + std::to_string(i) +
                       "; expected finite numbers");
    }
  }
  return out;
}

}  // namespace veloxquant
