// KIVI quantize-on-append: one block per (sequence, KV head), one thread per channel, one launch
// per layer step. The CPU cache's rule decides what gets encoded (whole key groups and value
// quads that leave the residual window); their rows come from the ring (older tokens) or from
// the append (RoPE applied, rounded to fp16), and are encoded with the CPU codec's arithmetic
// step for step (AffineGrid, kivi/affine_grid.h), so the bytes match. Only then does the block
// write the new rows that stay in the window into the ring, so no row is overwritten before it
// was read.
#include <cuda_fp16.h>

#include "cuda/attention/launchers.h"
#include "cuda/common/appended_rows.cuh"
#include "cuda/common/check.cuh"
#include "cuda/kivi/kivi_layout.cuh"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

constexpr int kValueBatch = 32;  // value tokens (8 quads) encoded per pass

// kivi::AffineGrid::fit and quantize, with every rounding written out (_rn) so nvcc cannot fuse
// a multiply-add the CPU does not fuse.
struct Grid {
  uint16_t scale_f16, min_f16;
  float scale, min;
  float levels;

  __device__ static Grid fit(float lo, float hi, int bits) {
    Grid g;
    g.levels = static_cast<float>((1 << bits) - 1);
    g.min_f16 = __half_as_ushort(__float2half_rn(lo));
    g.min = __half2float(__ushort_as_half(g.min_f16));
    if (g.min > lo) {
      const uint16_t h = g.min_f16;
      g.min_f16 = h == 0x0000 ? 0x8001 : ((h & 0x8000) ? h + 1 : h - 1);
      g.min = __half2float(__ushort_as_half(g.min_f16));
    }
    const float step = __fdiv_rn(__fsub_rn(hi, g.min), g.levels);
    g.scale_f16 = __half_as_ushort(__float2half_rn(step));
    g.scale = __half2float(__ushort_as_half(g.scale_f16));
    while (__fadd_rn(g.min, __fmul_rn(g.scale, g.levels)) < hi) {
      g.scale_f16 = static_cast<uint16_t>(g.scale_f16 + 1);
      g.scale = __half2float(__ushort_as_half(g.scale_f16));
    }
    return g;
  }
  __device__ uint8_t quantize(float x) const {
    if (scale == 0) return 0;
    const float c = rintf(__fdiv_rn(__fsub_rn(x, min), scale));
    return static_cast<uint8_t>(c < 0 ? 0 : (c > levels ? levels : c));
  }
};

// Channel c of token t of one stream: from the ring if it was cached before this append.
__device__ float stream_value(const AppendParams& p, const StreamView& s, const uint16_t* rows,
                              bool key, int seq, int t, int c) {
  if (t < p.old_tokens) {
    const __half* ring = reinterpret_cast<const __half*>(s.ring) + static_cast<size_t>(seq) * s.ring_tokens * p.head_dim;
    return __half2float(ring[static_cast<size_t>(t % s.ring_tokens) * p.head_dim + c]);
  }
  return appended_value(p, rows, key, seq, t - p.old_tokens, c);
}

__global__ void kivi_append_kernel(AppendParams p, int bits, int group) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int d = p.head_dim, c = threadIdx.x, seq = blockIdx.x;
  const int rows = max(group, kValueBatch);
  float* x = reinterpret_cast<float*>(smem);                    // [rows][d]
  uint8_t* q = smem + sizeof(float) * rows * d;                 // [rows][d] codes
  const int total = p.old_tokens + p.n;
  const kivi::KeyLayout kl{d, bits, group};
  const kivi::ValueLayout vl{d, bits, min(group, d)};
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
    uint8_t* block = p.keys.codes + seq * p.keys.stream_bytes + static_cast<size_t>(g0 / group) * kl.block_bytes();
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

  // Values: quads of 4 tokens, per token and channel group; up to 8 quads per pass.
  const int v0 = encoded_tokens(p.old_tokens, p.residual, 4);
  const int v1 = encoded_tokens(total, p.residual, 4);
  const int groups = vl.groups();
  uint16_t* params = reinterpret_cast<uint16_t*>(q + rows * d);  // [kValueBatch][groups][2]
  for (int b0 = v0; b0 < v1; b0 += kValueBatch) {
    const int count = min(kValueBatch, v1 - b0);
    for (int t = 0; t < count; ++t) x[t * d + c] = stream_value(p, p.values, p.v, false, seq, b0 + t, c);
    __syncthreads();
    for (int job = c; job < count * groups; job += d) {
      const int t = job / groups, g = job % groups;
      float lo = x[t * d + g * vl.group], hi = lo;
      for (int j = 1; j < vl.group; ++j) lo = fminf(lo, x[t * d + g * vl.group + j]), hi = fmaxf(hi, x[t * d + g * vl.group + j]);
      const Grid grid = Grid::fit(lo, hi, bits);
      params[(t * groups + g) * 2] = grid.scale_f16;
      params[(t * groups + g) * 2 + 1] = grid.min_f16;
    }
    __syncthreads();
    for (int t = 0; t < count; ++t) {
      const uint16_t* gp = params + (t * groups + c / vl.group) * 2;
      Grid grid;
      grid.scale_f16 = gp[0], grid.min_f16 = gp[1];
      grid.scale = __half2float(__ushort_as_half(gp[0])), grid.min = __half2float(__ushort_as_half(gp[1]));
      grid.levels = static_cast<float>((1 << bits) - 1);
      q[t * d + c] = grid.quantize(x[t * d + c]);
    }
    __syncthreads();
    uint8_t* first = p.values.codes + seq * p.values.stream_bytes + static_cast<size_t>(b0 / 4) * vl.block_bytes();
    const int quad_bytes = vl.quad_bytes();
    for (int job = c; job < count / 4 * vl.block_bytes(); job += d) {
      const int quad = job / vl.block_bytes(), at = job % vl.block_bytes();
      uint8_t* block = first + quad * vl.block_bytes();
      if (at < quad_bytes) {
        // Row r, lane L (channel in 16), byte i (token) holds channels r * 16cpb + 16k + L.
        const int r = at / 64, lane = at % 64 / 4, i = at % 4;
        unsigned out = 0;
        for (unsigned k = 0; k < cpb; ++k) out |= static_cast<unsigned>(q[(quad * 4 + i) * d + r * 16 * cpb + 16 * k + lane]) << (bits * k);
        block[at] = static_cast<uint8_t>(out);
      } else if ((at - quad_bytes) % 2 == 0) {
        // fp16 scale[groups][4], then min[groups][4].
        const int half = (at - quad_bytes) / 2, is_min = half / (4 * groups), g = half % (4 * groups) / 4, i = half % 4;
        reinterpret_cast<uint16_t*>(block + quad_bytes)[half] = params[((quad * 4 + i) * groups + g) * 2 + is_min];
      }
    }
    __syncthreads();
  }

  // The rows that stay in the residual window go to the rings, after every read of them above.
  for (int t = max(p.old_tokens, k1); t < total; ++t) {
    __half* ring = reinterpret_cast<__half*>(p.keys.ring) + (static_cast<size_t>(seq) * p.keys.ring_tokens + t % p.keys.ring_tokens) * d;
    ring[c] = __float2half_rn(appended_value(p, p.k, true, seq, t - p.old_tokens, c));
  }
  for (int t = max(p.old_tokens, v1); t < total; ++t) {
    __half* ring = reinterpret_cast<__half*>(p.values.ring) + (static_cast<size_t>(seq) * p.values.ring_tokens + t % p.values.ring_tokens) * d;
    ring[c] = reinterpret_cast<const __half*>(p.v)[(static_cast<size_t>(seq) * p.n + t - p.old_tokens) * d + c];
  }
}

}  // namespace

void launch_kivi_append(const AppendParams& p, int batch, int bits, int group, cudaStream_t stream) {
  const int rows = std::max(group, kValueBatch), groups = p.head_dim / std::min(group, p.head_dim);
  const size_t bytes = static_cast<size_t>(rows) * p.head_dim * 5 + kValueBatch * groups * 4;
  VQ_CUDA_CHECK(cudaFuncSetAttribute(kivi_append_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(bytes)));
  kivi_append_kernel<<<batch * p.kv_heads, p.head_dim, bytes, stream>>>(p, bits, group);
  VQ_CUDA_CHECK_LAUNCH("kivi_append_kernel");
}

}  // namespace veloxquant::cuda
