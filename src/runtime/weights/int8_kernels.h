// Single-threaded integer kernels over consecutive rows of a quantized weight matrix (every type
// of gguf/block_codes.h), on activations rounded to int8 as llama.cpp rounds them (activations.h):
// each weight block's codes are multiplied by the activation codes in 8-bit SIMD (AVX-512 VNNI's
// dot product of 4 unsigned by 4 signed bytes where Highway's target has it) into exact 32-bit
// sums, and the f32 scales are applied once per group of 16 or 32. The stored blocks are read in
// place.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/weights/activations.h"
#include "veloxquant/gguf.h"

namespace veloxquant::runtime::kernels {

// Both kernels: y[t * ldy + i] = row_i . x_t for rows i < nrows (row i at w + i * row_bytes,
// `cols` elements) and tokens t < ntokens of `a`, which holds x quantized with this type's group
// and code offset.
using QuantRowsKernel = void (*)(const uint8_t* w, size_t row_bytes, size_t nrows, size_t cols,
                                 const QuantizedActivations& a, size_t ntokens, float* y, size_t ldy);

struct QuantKernels {
  size_t group;     // the type's scale group: what quantize_activations needs
  int code_offset;  // likewise
  // llama.cpp's activation blocks for the type: Q8_0 / Q8_1 for the 32-element types, Q8_K for
  // the 256-element ones (k-quants, IQ4_XS).
  ActivationRounding rounding;
  // Few tokens (decoding): each block is unpacked in registers once per 4 rows and 4 tokens and
  // dotted lane by lane with the activations. A result does not depend on nrows or ntokens, so
  // splitting rows or tokens across calls gives the same bits.
  QuantRowsKernel dot_rows;
  // Many tokens (prompts): panels of panel_rows rows are unpacked once into a transposed copy
  // that every tile of 8 tokens reuses, lanes running over rows. A result does not depend on how
  // the rows are split as long as the splits are multiples of panel_rows.
  QuantRowsKernel gemm_rows;
  size_t panel_rows;
};

// The kernels of a quantized type, or nullptr for the plain float types and unsupported ones.
const QuantKernels* quant_kernels(GgmlType type);

}  // namespace veloxquant::runtime::kernels
