#include "arrays.h"

#include <fmt/format.h>

#include <string>

#include "veloxquant/error.h"

namespace veloxquant::python {
namespace {

std::string dtype_name(nb::dlpack::dtype t) {
  const char* kind = t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float) ? "float"
                     : t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Int) ? "int"
                     : t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::UInt) ? "uint"
                                                                                      : "other";
  return fmt::format("{}{}", kind, t.bits);
}

// "[4, 2, 128] float64"
std::string describe(const InArray& a) {
  std::string dims;
  for (size_t i = 0; i < a.ndim(); ++i) dims += fmt::format("{}{}", i ? ", " : "", a.shape(i));
  return fmt::format("[{}] {}", dims, dtype_name(a.dtype()));
}

// numpy owns nothing of ours: a capsule deletes the vector when the array is collected.
template <typename T>
nb::ndarray<nb::numpy, T> owning_array(std::vector<T> data, std::initializer_list<size_t> shape) {
  auto* owned = new std::vector<T>(std::move(data));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape, owner);
}

}  // namespace

TensorView view_of(const InArray& a, const char* what, int rank, bool allow_f16) {
  const bool f32 = a.dtype() == nb::dtype<float>();
  const bool f16 = a.dtype() == nb::dlpack::dtype{static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
  if (static_cast<int>(a.ndim()) != rank || !(f32 || (allow_f16 && f16))) {
    throw ShapeError(fmt::format("{} is {}; expected {} dimensions of {}", what, describe(a), rank,
                                 allow_f16 ? "float32 or float16" : "float32"));
  }
  TensorView view;
  view.data = a.data();
  view.dtype = f32 ? DType::F32 : DType::F16;
  view.rank = rank;
  for (int i = 0; i < rank; ++i) view.shape[static_cast<size_t>(i)] = a.shape(static_cast<size_t>(i));
  return view;
}

std::span<const uint8_t> bytes_of(const InArray& a, const char* what) {
  if (a.ndim() != 1 || a.dtype() != nb::dtype<uint8_t>()) {
    throw ShapeError(fmt::format("{} is {}; expected one dimension of uint8 (what encode returned)",
                                 what, describe(a)));
  }
  return {static_cast<const uint8_t*>(a.data()), a.shape(0)};
}

FloatArray float_array(std::vector<float> data, std::initializer_list<size_t> shape) {
  return owning_array(std::move(data), shape);
}

ByteArray byte_array(std::vector<uint8_t> data) {
  const size_t n = data.size();
  return owning_array(std::move(data), {n});
}

}  // namespace veloxquant::python
