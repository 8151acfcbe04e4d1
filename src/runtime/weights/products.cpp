// matvec and matmul: the SIMD row kernels split over threads. Plain float weights take f32
// activations (sgemm for long prompts); quantized ones take activations rounded to int8 per group
// (activations.h) and the integer kernels (int8_kernels.h).
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "core/blas.h"
#include "core/parallel.h"
#include "runtime/weights/activations.h"
#include "runtime/weights/int8_kernels.h"
#include "runtime/weights/row_kernels.h"
#include "runtime/weights/threading.h"
#include "runtime/weights/weight_matrix.h"

namespace veloxquant::runtime {
namespace {

// From this many tokens on, matmul decodes plain float W to f32 tiles for sgemm; below it the row
// kernels, which convert each weight once per 4 tokens in registers, are faster. Measured
// crossovers (bench/matmul.cpp, one core, 512 x 64 and 4096 x 4096): F32 12-16 tokens (sgemm's
// only cost is packing), F16 / BF16 48-64 (cheap to convert).
size_t sgemm_min_tokens(GgmlType type) { return type == GgmlType::F32 ? 16 : 48; }
// From this many tokens on, quantized W goes to the integer kernels' transposed panels, whose
// unpacking costs about as much as 8-10 tokens of the row kernels (bench/matmul.cpp, one core,
// 5632 x 2048: Q4_K and Q8_0 cross over at 9-11 tokens, Q6_K at about 16).
constexpr size_t kGemmMinTokens = 12;
// f32 weights per sgemm call: a tile of W rows (decoded to scratch unless F32).
constexpr size_t kTileBytes = size_t{4} << 20;
// A product worth threads is cut into at least this many tiles, so that both cores get work
// whatever the thread count (tiles depend only on the shape: results do not depend on threads).
constexpr size_t kMinTiles = 4;

// Calls fn(r0, m) for consecutive chunks of rows covering [0, rows), in multiples of `align`
// rows, across threads when `work` multiply-adds pay for them. A few chunks per thread, so that a
// core slowed by other work takes fewer of them.
template <class Fn>
void split_rows(size_t rows, size_t align, size_t work, Fn&& fn) {
  const int threads = threads_for(work, kParallelMacs);
  if (threads <= 1) {
    fn(size_t{0}, rows);
    return;
  }
  const size_t chunks = static_cast<size_t>(threads) * 4;
  const size_t chunk_rows = ((rows + chunks - 1) / chunks + align - 1) / align * align;
  parallel_for((rows + chunk_rows - 1) / chunk_rows, [&](size_t i) {
    const size_t r0 = i * chunk_rows;
    fn(r0, std::min(chunk_rows, rows - r0));
  });
}

// Y[t * rows + i] = row_i . x_t for n tokens of plain float weights (f32 row kernels).
void dot_tokens(const WeightMatrix& w, const float* x, size_t n, float* y) {
  const size_t rb = w.row_bytes();
  split_rows(w.rows, 4, n * w.rows * w.cols, [&](size_t r0, size_t m) {
    kernels::dot_rows(w.type, w.data.data() + r0 * rb, rb, m, w.cols, x, w.cols, n, y + r0, w.rows);
  });
}

// The same for quantized weights: x rounded to int8 once, then the integer kernels.
void quant_tokens(const WeightMatrix& w, const kernels::QuantKernels& k, const float* x, size_t n,
                  float* y) {
  // Grows once per thread to the largest product seen, then is reused by every call. The threads
  // below read the caller's copy through this reference (a thread_local named in the lambda
  // would be each thread's own).
  thread_local QuantizedActivations storage;
  QuantizedActivations& a = storage;
  const bool gemm = n >= kGemmMinTokens;
  quantize_activations(x, n, w.cols, k.group, k.code_offset, k.rounding,
                       gemm ? ActivationLayout::kTiles : ActivationLayout::kRows, a);
  const kernels::QuantRowsKernel kernel = gemm ? k.gemm_rows : k.dot_rows;
  const size_t rb = w.row_bytes();
  split_rows(w.rows, gemm ? k.panel_rows : 4, n * w.rows * w.cols, [&](size_t r0, size_t m) {
    kernel(w.data.data() + r0 * rb, rb, m, w.cols, a, n, y + r0, w.rows);
  });
}

// y[n, m] (row stride ldy) = x[n, k] w[m, k]^T.
void sgemm_nt(const float* x, size_t n, size_t k, const float* w, size_t m, float* y, size_t ldy) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(n),
              static_cast<blasint>(m), static_cast<blasint>(k), 1.0f, x, static_cast<blasint>(k),
              w, static_cast<blasint>(k), 0.0f, y, static_cast<blasint>(ldy));
}

void sgemm_tiles(const WeightMatrix& w, const float* x, size_t n, float* y) {
  if (n > INT_MAX || w.rows > INT_MAX || w.cols > INT_MAX) {
    throw ShapeError(fmt::format("matmul of tensor '{}' ({} x {}) with {} tokens: every size must "
                                 "be at most {} for BLAS", w.name, w.rows, w.cols, n, INT_MAX));
  }
  configure_blas();
  const size_t work = n * w.rows * w.cols;
  const int threads = threads_for(work, kParallelSgemmMacs);
  const size_t rb = w.row_bytes();
  // Rows in multiples of 16 (sgemm's register tile). Larger tiles repack X less often; the
  // scratch of a decoded tile outgrows L2, but measured faster than L2-sized tiles all the same.
  size_t tile_rows = std::max<size_t>(16, kTileBytes / (w.cols * sizeof(float)) / 16 * 16);
  if (work >= kParallelSgemmMacs) {
    const size_t share = ((w.rows + kMinTiles - 1) / kMinTiles + 15) / 16 * 16;
    tile_rows = std::min(tile_rows, share);
  }
  const size_t tiles = (w.rows + tile_rows - 1) / tile_rows;
  auto run_tile = [&](size_t i) {
    const size_t r0 = i * tile_rows, m = std::min(tile_rows, w.rows - r0);
    const uint8_t* rows = w.data.data() + r0 * rb;
    if (w.type == GgmlType::F32) {
      sgemm_nt(x, n, w.cols, reinterpret_cast<const float*>(rows), m, y + r0, w.rows);
      return;
    }
    // Grows once per thread to the largest tile seen, then is reused by every call.
    thread_local std::vector<float> scratch;
    if (scratch.size() < m * w.cols) scratch.resize(m * w.cols);
    kernels::decode_rows(w.type, rows, rb, m, w.cols, scratch.data());
    sgemm_nt(x, n, w.cols, scratch.data(), m, y + r0, w.rows);
  };
  if (threads > 1 && tiles > 1) {
    parallel_for(tiles, run_tile);
  } else {
    for (size_t i = 0; i < tiles; ++i) run_tile(i);
  }
}

}  // namespace

void matvec(const WeightMatrix& w, const float* x, float* y) { matmul(w, x, 1, y); }

void matmul(const WeightMatrix& w, const float* x, size_t n, float* y) {
  if (const kernels::QuantKernels* k = kernels::quant_kernels(w.type)) {
    quant_tokens(w, *k, x, n, y);
  } else if (n < sgemm_min_tokens(w.type)) {
    dot_tokens(w, x, n, y);
  } else {
    sgemm_tiles(w, x, n, y);
  }
}

}  // namespace veloxquant::runtime
