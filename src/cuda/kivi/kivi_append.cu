// KIVI quantize-on-append: one block per (sequence, KV head), one thread per channel, one launch
// per layer step. The CPU cache's rule decides what gets encoded (whole key groups and value
// quads that leave the residual window); their rows come from the ring (older tokens) or from
// the append (RoPE applied, rounded to fp16), and are encoded with the CPU codec's arithmetic
// step for step (AffineGrid, common/affine_grid.h; the values in kivi_encode.cuh), so the bytes
// match. Only then does the block
// write the new rows that stay in the window into the ring, so no row is overwritten before it
// was read.
#include <cuda_fp16.h>

#include "cuda/kivi/kivi_launch.h"
#include "cuda/common/check.cuh"
#include "cuda/kivi/kivi_encode.cuh"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

using kivi::Grid;
using kivi::kValueBatch;
using kivi::stream_value;

__global__ void kivi_append_kernel(AppendParams p, int bits, int group) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int d = p.head_dim, c = threadIdx.x, seq = blockIdx.x;
  const int rows = max(group, kValueBatch);
  float* x = reinterpret_cast<float*>(smem);                    // [rows][d]
  uint8_t* q = smem + sizeof(float) * rows * d;                 // [rows][d] codes
  const int total = p.old_tokens + p.n;
  const kivi::KeyLayout kl{d, bits, group};
  const unsigned cpb = 8 / bits;

  // Keys: whole groups of `group` tokens, per channel.
  const int k0 = encoded_tokens(p.old_tokens, p.residual, group);
  const int k1 = encoded_tokens(total, p.residual, group);
  for (int g0 = k0; g0 < k1; g0 += group) {
    float lo = INFINITY, hi = -INFINITY;
    for (int t = 0; t < group; ++t) {
      const float v = stream_value(p, p.keys, p.k, true, seq, g0 + t, c);
      x[t * d + c] = v;
      lo = fminf(lo, v), hi = fmaxf(hi, v);
    }
    const Grid grid = Grid::fit(lo, hi, bits);
    uint8_t* block = p.keys.codes + seq * p.keys.stream_bytes +
                     static_cast<size_t>(p.keys.slot(g0) / group) * kl.block_bytes();
    reinterpret_cast<uint16_t*>(block)[c] = grid.scale_f16;
    reinterpret_cast<uint16_t*>(block)[d + c] = grid.min_f16;
    for (int t = 0; t < group; ++t) q[t * d + c] = grid.quantize(x[t * d + c]);
    __syncthreads();
    // Tile bytes: tile j, row r, lane (token) L, byte i holds channels r * 4cpb + 4k + i.
    const int tile_bytes = kl.tile_bytes();
    for (int byte = c; byte < group / 16 * tile_bytes; byte += d) {
      const int j = byte / tile_bytes, r = byte % tile_bytes / 64, lane = byte % 64 / 4, i = byte % 4;
      unsigned out = 0;
      for (unsigned k = 0; k < cpb; ++k) out |= static_cast<unsigned>(q[(j * 16 + lane) * d + r * 4 * cpb + 4 * k + i]) << (bits * k);
      block[4 * d + byte] = static_cast<uint8_t>(out);
    }
    __syncthreads();
  }

  // Values: the quads that leave the window, then the rows that stay in the window go to the
  // rings, after every read of them above.
  kivi::encode_values(p, bits, min(group, d), smem);
  kivi::write_ring_rows(p, p.keys, true, k1);
  kivi::write_ring_rows(p, p.values, false, encoded_tokens(total, p.residual, 4));
}

}  // namespace

void launch_kivi_append(const AppendParams& p, int batch, int bits, int group, cudaStream_t stream) {
  const int rows = std::max(group, kValueBatch);
  const int groups = kivi::ValueLayout{p.head_dim, bits, std::min(group, p.head_dim)}.groups();
  const size_t bytes = std::max(static_cast<size_t>(rows) * p.head_dim * 5, kivi::value_encode_bytes(p.head_dim, groups));
  VQ_CUDA_CHECK(cudaFuncSetAttribute(kivi_append_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(bytes)));
  kivi_append_kernel<<<batch * p.kv_heads, p.head_dim, bytes, stream>>>(p, bits, group);
  VQ_CUDA_CHECK_LAUNCH("kivi_append_kernel");
}

}  // namespace veloxquant::cuda
