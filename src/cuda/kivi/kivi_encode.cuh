// KIVI's encoding on the device, shared by the appends that store KIVI values (kivi_append.cu,
// qjl/qjl_append.cu): the grid fit with the CPU codec's arithmetic step for step
// (common/affine_grid.h), the value quads that leave the residual window, and the ring writes. All
// run in one block per (sequence, KV head) with one thread per channel (blockDim.x == head_dim).
#pragma once

#include <cuda_fp16.h>

#include "cuda/common/appended_rows.cuh"
#include "cuda/kivi/kivi_layout.cuh"

namespace veloxquant::cuda::kivi {

inline constexpr int kValueBatch = 32;  // value tokens (8 quads) encoded per pass

// AffineGrid::fit and quantize (codecs/common/affine_grid.h), with every rounding written out (_rn) so nvcc cannot fuse
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

// The key groups an append encodes, split so that a long prefill runs them in parallel and no
// block reads a ring row another writes: block (s, 0) takes the groups that hold rows cached
// before the append, [first, last), then the values and the rings; blocks (s, 1..) one group each
// of the `fresh_groups` made only of appended rows, from token `fresh` on.
struct KeyGroupPlan {
  int first, last, fresh, fresh_groups;
  __host__ static KeyGroupPlan of(const AppendParams& p, int group) {
    const int k0 = encoded_tokens(p.old_tokens, p.residual, group);
    const int k1 = encoded_tokens(p.old_tokens + p.n, p.residual, group);
    const int fresh = k0 > (p.old_tokens + group - 1) / group * group
                          ? k0
                          : (p.old_tokens + group - 1) / group * group;
    return {k0, fresh < k1 ? fresh : k1, fresh, k1 > fresh ? (k1 - fresh) / group : 0};
  }
};

// Channel c of token t of one stream: from the ring if it was cached before this append.
__device__ inline float stream_value(const AppendParams& p, const StreamView& s, const uint16_t* rows,
                                     bool key, int seq, int t, int c) {
  if (t < p.old_tokens) {
    const __half* ring = reinterpret_cast<const __half*>(s.ring) + static_cast<size_t>(seq) * s.ring_tokens * p.head_dim;
    return __half2float(ring[static_cast<size_t>(t % s.ring_tokens) * p.head_dim + c]);
  }
  return appended_value(p, rows, key, seq, t - p.old_tokens, c);
}

// Shared memory encode_values() needs: rows [kValueBatch][head_dim] floats, codes
// [kValueBatch][head_dim], grids [kValueBatch][groups][2] fp16.
__host__ __device__ inline size_t value_encode_bytes(int head_dim, int groups) {
  return static_cast<size_t>(kValueBatch) * head_dim * 5 + kValueBatch * groups * 4;
}

// The value quads that leave the window in this append, encoded per token and channel group of
// `group` channels (the last one of a token shorter where it does not divide head_dim); up to 8
// quads per pass. Reads the value ring, so it
// runs before write_ring_rows(p.values, ...). Ends with the block synchronized.
__device__ inline void encode_values(const AppendParams& p, int bits, int group, uint8_t* smem) {
  const int d = p.head_dim, c = threadIdx.x, seq = blockIdx.x;
  const ValueLayout vl{d, bits, group};
  const unsigned cpb = 8 / bits;
  float* x = reinterpret_cast<float*>(smem);                   // [kValueBatch][d]
  uint8_t* q = smem + sizeof(float) * kValueBatch * d;         // [kValueBatch][d] codes
  uint16_t* params = reinterpret_cast<uint16_t*>(q + kValueBatch * d);  // [kValueBatch][groups][2]
  const int v0 = encoded_tokens(p.old_tokens, p.residual, 4);
  const int v1 = encoded_tokens(p.old_tokens + p.n, p.residual, 4);
  const int groups = vl.groups();
  for (int b0 = v0; b0 < v1; b0 += kValueBatch) {
    const int count = min(kValueBatch, v1 - b0);
    for (int t = 0; t < count; ++t) x[t * d + c] = stream_value(p, p.values, p.v, false, seq, b0 + t, c);
    __syncthreads();
    for (int job = c; job < count * groups; job += d) {
      const int t = job / groups, g = job % groups, width = min(vl.group, d - g * vl.group);
      const float* xg = x + t * d + g * vl.group;
      float lo = xg[0], hi = lo;
      for (int j = 1; j < width; ++j) lo = fminf(lo, xg[j]), hi = fmaxf(hi, xg[j]);
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
    uint8_t* stream = p.values.codes + seq * p.values.stream_bytes;
    const int quad_bytes = vl.quad_bytes();
    const bool tiled = vl.tiled();
    for (int job = c; job < count / 4 * vl.block_bytes(); job += d) {
      const int quad = job / vl.block_bytes(), at = job % vl.block_bytes();
      uint8_t* block = stream + static_cast<size_t>(p.values.slot(b0 + 4 * quad) / 4) * vl.block_bytes();
      if (at < quad_bytes) {
        // Tiled: row r, lane L (channel in 16), byte i (token) holds channels r * 16cpb + 16k + L.
        // Dense: byte at holds codes at * cpb .. of the quad's 4 x d, low bits first.
        const int r = at / 64, lane = at % 64 / 4, i = at % 4;
        const uint8_t* quad_codes = q + quad * 4 * d;
        unsigned out = 0;
        for (unsigned k = 0; k < cpb; ++k) {
          const int code = tiled ? i * d + r * 16 * cpb + 16 * k + lane : at * cpb + k;
          out |= static_cast<unsigned>(quad_codes[code]) << (bits * k);
        }
        block[at] = static_cast<uint8_t>(out);
      } else if ((at - quad_bytes) % 2 == 0) {
        // fp16 scale[groups][4], then min[groups][4].
        const int half = (at - quad_bytes) / 2, is_min = half / (4 * groups), g = half % (4 * groups) / 4, i = half % 4;
        reinterpret_cast<uint16_t*>(block + quad_bytes)[half] = params[((quad * 4 + i) * groups + g) * 2 + is_min];
      }
    }
    __syncthreads();
  }
}

// The appended rows from token `from` on (those that stay in the window) into the stream's ring,
// keys after RoPE; call it after every read of the ring rows they replace.
__device__ inline void write_ring_rows(const AppendParams& p, const StreamView& s, bool key, int from) {
  const int d = p.head_dim, c = threadIdx.x, seq = blockIdx.x;
  for (int t = max(p.old_tokens, from); t < p.old_tokens + p.n; ++t) {
    __half* ring = reinterpret_cast<__half*>(s.ring) + (static_cast<size_t>(seq) * s.ring_tokens + t % s.ring_tokens) * d;
    ring[c] = key ? __float2half_rn(appended_value(p, p.k, true, seq, t - p.old_tokens, c))
                  : reinterpret_cast<const __half*>(p.v)[(static_cast<size_t>(seq) * p.n + t - p.old_tokens) * d + c];
  }
}

}  // namespace veloxquant::cuda::kivi
