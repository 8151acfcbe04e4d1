// matvec and matmul: the SIMD row kernels split over threads, and sgemm for long prompts.
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "core/blas.h"
#include "core/parallel.h"
#include "runtime/weights/row_kernels.h"
#include "runtime/weights/threading.h"
#include "runtime/weights/weight_matrix.h"

namespace veloxquant::runtime {
namespace {

// From this many tokens on, matmul decodes W to f32 tiles for sgemm; below it the row kernels,
// which decode each weight once per 4 tokens in registers, are faster. Measured crossovers
// (bench/matmul.cpp, one core, 512 x 64 and 4096 x 4096): F32 12-16 tokens (sgemm's only cost
// is packing), F16 / BF16 48-64 (cheap to decode), Q8_0 / Q4_0 20-40.
size_t sgemm_min_tokens(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return 16;
    case GgmlType::F16:
    case GgmlType::BF16: return 48;
    default: return 32;
  }
}
// f32 weights per sgemm call: a tile of W rows (decoded to scratch unless F32).
constexpr size_t kTileBytes = size_t{4} << 20;
// A product worth threads is cut into at least this many tiles, so that both cores get work
// whatever the thread count (tiles depend only on the shape: results do not depend on threads).
constexpr size_t kMinTiles = 4;

// Y[t * rows + i] = row_i . x_t for n tokens, rows split across threads when the work pays.
void dot_tokens(const WeightMatrix& w, const float* x, size_t n, float* y) {
  const size_t rb = w.row_bytes();
  const int threads = threads_for(n * w.rows * w.cols, kParallelMacs);
  if (threads <= 1) {
    kernels::dot_rows(w.type, w.data.data(), rb, w.rows, w.cols, x, w.cols, n, y, w.rows);
    return;
  }
  // Whole groups of 4 rows, a few chunks per thread so that a core slowed by other work takes
  // fewer of them.
  const size_t chunks = static_cast<size_t>(threads) * 4;
  const size_t chunk_rows = ((w.rows + chunks - 1) / chunks + 3) / 4 * 4;
  parallel_for((w.rows + chunk_rows - 1) / chunk_rows, [&](size_t i) {
    const size_t r0 = i * chunk_rows, m = std::min(chunk_rows, w.rows - r0);
    kernels::dot_rows(w.type, w.data.data() + r0 * rb, rb, m, w.cols, x, w.cols, n, y + r0, w.rows);
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

void matvec(const WeightMatrix& w, const float* x, float* y) { dot_tokens(w, x, 1, y); }

void matmul(const WeightMatrix& w, const float* x, size_t n, float* y) {
  if (n < sgemm_min_tokens(w.type)) {
    dot_tokens(w, x, n, y);
  } else {
    sgemm_tiles(w, x, n, y);
  }
}

}  // namespace veloxquant::runtime
