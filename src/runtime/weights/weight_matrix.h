// 2-D weight tensors used as stored in the GGUF file (the plain float types, the legacy quants,
// the k-quants and the IQ4 types), and the
// matrix-vector / matrix-matrix products the forward pass runs on them.
//
// Plain float weights (F32, F16, BF16) take f32 activations: converted in registers (matvec) or
// to an f32 tile for sgemm (matmul), every product and sum f32. Quantized weights take their
// activations rounded to int8 as llama.cpp rounds them, to the same codes and scales: blocks of
// 32 values with fp16 scales (Q8_0 / Q8_1) for the 32-element types, of 256 with f32 scales
// (Q8_K) for the k-quants and IQ4_XS. The stored blocks' codes are multiplied by those int8 codes
// in exact integer sums and the scales applied once per group of 16 or 32 (activations.h,
// int8_kernels.h). Results match a product of the dequantized weights with the rounded
// activations up to f32 rounding; the rounding itself moves each value by about half a step
// (max |x| / 254 of its block).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "veloxquant/gguf.h"

namespace veloxquant::runtime {

// `rows` output features of `cols` contiguous elements each (ggml dims = {cols, rows}).
// A view: `data` must outlive it (for from_gguf, the GgufFile or a copy of it).
struct WeightMatrix {
  std::string name;
  GgmlType type = GgmlType::F32;
  size_t rows = 0;
  size_t cols = 0;
  std::span<const uint8_t> data;  // rows * row_bytes() bytes

  size_t row_bytes() const;
  // Rows [first, first + n) as a matrix of their own (one part of a fused tensor). Throws
  // ShapeError when they do not lie inside this one.
  WeightMatrix row_view(size_t first, size_t n) const;

  // A view over `data`; `name` is only for messages. Throws FormatError naming it if the type is
  // not supported, rows or cols is 0, cols is not a multiple of the type's block size, or data
  // does not hold exactly rows rows.
  static WeightMatrix view(std::string name, GgmlType type, size_t rows, size_t cols,
                           std::span<const uint8_t> data);

  // Checks that the tensor is 2-D (or 1-D with rows = 1), of a supported type, that cols is
  // a multiple of the block size and that its bytes lie inside the file. Throws FormatError
  // naming the tensor otherwise.
  static WeightMatrix from_gguf(const GgufFile& file, const GgufTensorInfo& info);
};

// Whether matvec/matmul accept this type: every type ggml_type_decodable accepts.
bool weight_type_supported(GgmlType type);

// y[rows] = W x, x has cols floats. Multithreaded over rows with OpenMP when the matrix is large
// enough to pay for it; never allocates.
void matvec(const WeightMatrix& w, const float* x, float* y);

// Y[n, rows] = X[n, cols] W^T (row-major X and Y). n = 1 is exactly matvec.
void matmul(const WeightMatrix& w, const float* x, size_t n, float* y);

// Row r decoded to f32 (cols floats): embedding lookups. Throws ShapeError if r >= rows.
void dequantize_row(const WeightMatrix& w, size_t r, float* out);

}  // namespace veloxquant::runtime
