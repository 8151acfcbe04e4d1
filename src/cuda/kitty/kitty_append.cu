// KITTY quantize-on-append, one launch per layer step, one thread per channel: blocks split the
// key groups as kivi::KeyGroupPlan says, block (s, 0) then encodes the KIVI value quads that leave
// the window and writes the rows that stay into the rings (kivi_encode.cuh). A key group repeats
// the CPU codec's operations (codecs/kitty/kitty_key_codec.cpp): each channel's min and max over
// the group from token 0 up, as std::min and std::max pick them; the `boosted` channels of widest
// range get the high bits (ties: the lower channel, as the CPU's partial sort); AffineGrid's fit
// and rounding (kivi::Grid); the codes of each kind packed token-major, ascending channels, LSB
// first.
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/common/check.cuh"
#include "cuda/kitty/kitty_launch.h"
#include "cuda/kitty/kitty_layout.cuh"
#include "cuda/kivi/kivi_encode.cuh"

namespace veloxquant::cuda {
namespace {

// Shared memory of a key group: rows [G][d] floats and codes [G][d] bytes, per channel its range
// (float), its boosted flag and the channel at each rank of either kind (bytes).
size_t key_group_bytes(int d, int group) {
  return static_cast<size_t>(group) * d * 5 + static_cast<size_t>(d) * 6;
}

// Byte `byte` of one code stream: `count` codes of `bits` bits, code n being token n / per_token's
// channel at rank n % per_token (channel_at) of the group's codes q.
__device__ uint8_t packed_byte(const uint8_t* q, const uint8_t* channel_at, int per_token, int count,
                               int bits, int d, int byte) {
  unsigned out = 0;
  const int per_byte = 8 / bits;
  for (int k = 0; k < per_byte; ++k) {
    const int n = byte * per_byte + k;
    if (n < count)
      out |= static_cast<unsigned>(q[n / per_token * d + channel_at[n % per_token]]) << (bits * k);
  }
  return static_cast<uint8_t>(out);
}

// Key group [g0, g0 + group) of stream seq. Ends with the block synchronized.
__device__ void encode_key_group(const AppendParams& p, const KittyArgs& a, int g0, uint8_t* smem) {
  const int d = p.head_dim, c = threadIdx.x, seq = blockIdx.x, G = a.group;
  float* x = reinterpret_cast<float*>(smem);           // [G][d]
  float* range = x + G * d;                            // [d]
  uint8_t* q = reinterpret_cast<uint8_t*>(range + d);  // [G][d]
  uint8_t* boosted = q + G * d;                        // [d]
  uint8_t* low_at = boosted + d;                       // [d - boosted]: channel of each rank
  uint8_t* high_at = low_at + (d - a.boosted);         // [boosted]
  float lo = 0, hi = 0;
  for (int t = 0; t < G; ++t) {
    const float v = kivi::stream_value(p, p.keys, p.k, true, seq, g0 + t, c);
    x[t * d + c] = v;
    if (t == 0) lo = hi = v;
    lo = v < lo ? v : lo, hi = hi < v ? v : hi;
  }
  const float width = __fsub_rn(hi, lo);
  range[c] = width;
  __syncthreads();
  int wider = 0;
  for (int j = 0; j < d; ++j) wider += range[j] > width || (range[j] == width && j < c);
  const bool high = wider < a.boosted;
  boosted[c] = high;
  __syncthreads();
  int rank = 0;
  for (int j = 0; j < c; ++j) rank += boosted[j] == high;
  (high ? high_at : low_at)[rank] = static_cast<uint8_t>(c);
  const kivi::Grid grid = kivi::Grid::fit(lo, hi, high ? a.high_bits : a.bits);
  const kitty::KeyLayout kl{d, a.bits, a.high_bits, a.boosted, G};
  uint8_t* block = p.keys.codes + seq * p.keys.stream_bytes +
                   static_cast<size_t>(p.keys.slot(g0) / G) * kl.block_bytes();
  // Blocks and the grids within them sit at even bytes (every part of a block is a whole number of
  // 16-bit units but the mask, whose byte count is even for the head sizes the GPU takes).
  uint16_t* grids = reinterpret_cast<uint16_t*>(block + kl.grids_offset());
  grids[c] = grid.scale_f16;
  grids[d + c] = grid.min_f16;
  for (int t = 0; t < G; ++t) q[t * d + c] = grid.quantize(x[t * d + c]);
  __syncthreads();
  for (int i = c; i < kl.mask_bytes(); i += d) {
    unsigned bits = 0;
    for (int j = 0; j < 8 && 8 * i + j < d; ++j) bits |= static_cast<unsigned>(boosted[8 * i + j]) << j;
    block[i] = static_cast<uint8_t>(bits);
  }
  const int low = kl.low_channels();
  for (int i = c; i < kl.low_bytes(); i += d)
    block[kl.low_offset() + i] = packed_byte(q, low_at, low, G * low, a.bits, d, i);
  for (int i = c; i < kl.high_bytes(); i += d)
    block[kl.high_offset() + i] = packed_byte(q, high_at, a.boosted, G * a.boosted, a.high_bits, d, i);
  __syncthreads();
}

__global__ void kitty_append_kernel(AppendParams p, int vbits, KittyArgs a, kivi::KeyGroupPlan plan) {
  extern __shared__ __align__(16) uint8_t smem[];
  if (blockIdx.y > 0) {
    encode_key_group(p, a, plan.fresh + (blockIdx.y - 1) * a.group, smem);
    return;
  }
  for (int g0 = plan.first; g0 < plan.last; g0 += a.group) encode_key_group(p, a, g0, smem);
  const int total = p.old_tokens + p.n;
  kivi::encode_values(p, vbits, min(a.group, p.head_dim), smem);
  kivi::write_ring_rows(p, p.keys, true, encoded_tokens(total, p.residual, a.group));
  kivi::write_ring_rows(p, p.values, false, encoded_tokens(total, p.residual, 4));
}

}  // namespace

void launch_kitty_append(const AppendParams& p, int batch, int vbits, const KittyArgs& a,
                         cudaStream_t stream) {
  const kivi::KeyGroupPlan plan = kivi::KeyGroupPlan::of(p, a.group);
  const int value_groups = kivi::ValueLayout{p.head_dim, vbits, std::min(a.group, p.head_dim)}.groups();
  const size_t bytes = std::max(key_group_bytes(p.head_dim, a.group),
                                kivi::value_encode_bytes(p.head_dim, value_groups));
  VQ_CUDA_CHECK(cudaFuncSetAttribute(kitty_append_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(bytes)));
  kitty_append_kernel<<<dim3(batch * p.kv_heads, 1 + plan.fresh_groups), p.head_dim, bytes, stream>>>(
      p, vbits, a, plan);
  VQ_CUDA_CHECK_LAUNCH("kitty_append_kernel");
}

}  // namespace veloxquant::cuda
