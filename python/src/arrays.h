// Between numpy arrays and the library: inputs are read in place when they are C-contiguous on
// the CPU (nanobind copies any other layout into that one first), outputs own their buffers.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "veloxquant/tensor.h"

namespace veloxquant::python {

namespace nb = nanobind;

using InArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using FloatArray = nb::ndarray<nb::numpy, float>;
using ByteArray = nb::ndarray<nb::numpy, uint8_t>;

// A view of `a`, which must have `rank` dimensions and hold float32 (or float16 when
// `allow_f16`). Throws ShapeError naming `what`, its shape and dtype, and what was expected.
TensorView view_of(const InArray& a, const char* what, int rank, bool allow_f16);
// The bytes of `a`, a one-dimensional uint8 array; ShapeError naming `what` otherwise.
std::span<const uint8_t> bytes_of(const InArray& a, const char* what);

// numpy arrays that take over `data`; the shape's product must be data.size().
FloatArray float_array(std::vector<float> data, std::initializer_list<size_t> shape);
ByteArray byte_array(std::vector<uint8_t> data);

}  // namespace veloxquant::python
