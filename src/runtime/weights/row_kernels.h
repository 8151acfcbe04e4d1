// Single-threaded SIMD kernels over consecutive rows of a weight matrix of a plain float type
// (F32, F16, BF16), with f32 activations: the building blocks that matvec and matmul split across
// threads. The quantized types have integer kernels (int8_kernels.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "veloxquant/gguf.h"

namespace veloxquant::runtime::kernels {

// REQUIRES (both): row i starts at w + i * row_bytes.

// y[t * ldy + i] = row_i . x_t for rows i < nrows and tokens t < ntokens, x_t = x + t * ldx:
// f32 sums of f32 products, the weights converted in registers. A result does not depend on
// nrows or ntokens, so splitting rows or tokens across calls gives the same bits.
// REQUIRES: type is F32, F16 or BF16.
void dot_rows(GgmlType type, const uint8_t* w, size_t row_bytes, size_t nrows, size_t cols,
              const float* x, size_t ldx, size_t ntokens, float* y, size_t ldy);

// out[i * cols + c] = element c of row i, decoded to f32 (exactly veloxquant::dequantize's values).
// REQUIRES: weight_type_supported(type); cols a multiple of its block size.
void decode_rows(GgmlType type, const uint8_t* w, size_t row_bytes, size_t nrows, size_t cols,
                 float* out);

}  // namespace veloxquant::runtime::kernels
