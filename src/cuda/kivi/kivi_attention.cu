// Split decode attention straight from KIVI codes, on tensor cores (tc_decode.cuh): the codes
// become fp16 MMA operands as they are, with the scales folded into the other operand (the query
// for keys, the probabilities for values) and the minimums added once per head, so no
// dequantized key or value is ever formed. The ring of fp16 rows (the residual window, and keys
// of a partial group) is one more split: at most residual + group tokens.
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/attention/head_dims.h"
#include "cuda/attention/tc_decode.cuh"
#include "cuda/common/check.cuh"
#include "cuda/kivi/kivi_launch.h"
#include "cuda/kivi/kivi_values.cuh"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

template <int D, int BITS>
struct KiviTile {
  static constexpr int kCpb = 8 / BITS;
  static constexpr int kTileBytes = 16 * D * BITS / 8;     // one 16-token key lane tile
  static constexpr int kKeyBytes = 4 * D + 2 * kTileBytes + 64;  // params, tile, pad, tile
  __host__ __device__ static constexpr int stage_bytes(int value_block) { return kKeyBytes + 8 * value_block; }
};

// The fused region on tensor cores (tc_decode.cuh), VG channels per value scale.
//  - Keys: per 32-token tile (inside one key group) B = the query folded with the group's channel
//    scales, in fp16 (the softmax scale is applied to the f32 scores); the minimums give each head
//    one offset, the scores' starting value, through one more MMA per k step. A = the
//    codes themselves: lane (g, t) takes from the 32-bit word of token g (and g + 8) the codes at
//    shift bits * (t % cpb), bytes 0 and 2, then bytes 1 and 3, so k = 2t, 2t+1, 2t+8, 2t+9 are
//    channels 16k' + 4t + 0, 2, 1, 3: the query fragment is built in the same order.
//  - Values: kivi::ValueSums, or kivi::DenseValues for VG 0 (kivi_values.cuh), which decodes
//    each tile into the warp's tile of rows after the 2 x kWarps stages.
template <int D, int BITS, int VG>
__device__ void attend_codes(const AttendParams& p, int seq, int main_split, uint8_t* stages, float* pt) {
  using T = KiviTile<D, BITS>;
  constexpr int NK = D / 16, CPB = T::kCpb;
  const int group = p.format.get<KiviArgs>().group;
  const kivi::KeyLayout kl{D, BITS, group};
  const kivi::ValueLayout vl{D, BITS, min(group, D)};
  const int vblock = vl.block_bytes(), stage_bytes = T::stage_bytes(vblock);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const MmaLane ln(lane);
  uint8_t* buf[2] = {stages + (warp * 2) * stage_bytes, stages + (warp * 2 + 1) * stage_bytes};

  // B fragments of the query (head g) as given, in the lanes' channel order: k = 2t, 2t+1 are
  // channels 16k' + 4t + 0, 2 and k = 2t+8, 2t+9 are + 1, 3. Heads past the group are zero.
  uint32_t bq0[NK][2] = {};
  if (ln.g < p.group) {
    const uint2* q = reinterpret_cast<const uint2*>(p.q) + (static_cast<size_t>(seq) * p.group + ln.g) * D / 4;
#pragma unroll
    for (int k = 0; k < NK; ++k) {
      const uint2 c = q[4 * k + ln.t];  // channels 16k + 4t .. + 3
      bq0[k][0] = interleave_half2(c.x, c.y, false), bq0[k][1] = interleave_half2(c.x, c.y, true);
    }
  }

  const uint8_t* kseq = p.keys.codes + seq * p.keys.stream_bytes;
  const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
  const auto fetch = [&](uint8_t* dst, int tile) {
    const int t0 = p.keys.slot(tile * kTileTokens);
    const uint8_t* kb = kseq + static_cast<size_t>(t0 / kl.group) * kl.block_bytes();
    warp_copy_async(dst, kb, 4 * D, lane);
    const uint8_t* tiles = kb + 4 * D + (t0 % kl.group) / 16 * T::kTileBytes;
    warp_copy_async(dst + 4 * D, tiles, T::kTileBytes, lane);
    warp_copy_async(dst + 4 * D + T::kTileBytes + 64, tiles + T::kTileBytes, T::kTileBytes, lane);
    warp_copy_async(dst + T::kKeyBytes, vseq + static_cast<size_t>(t0 / 4) * vblock, 8 * vblock, lane);
  };

  TcSoftmax st;
  using Values = kivi::ValuesOf<D, BITS, VG>;
  Values values = kivi::warp_values<D, BITS, VG>(stages, stage_bytes, warp, vl.group);
  const int key_shift = BITS * (ln.t % CPB), key_row = ln.t / CPB;
  for_each_tile(p, main_split, buf, fetch, [&](uint8_t* stage, int tile) {
    // Per k step: B = the query times the channel scales (one fp16 rounding), and one MMA with
    // A = the channel minimums in every row gives each token its offset q . min.
    const uint2* kscale = reinterpret_cast<const uint2*>(stage);  // 4 channels each
    uint32_t bq[NK][2];
    float off[4] = {};
#pragma unroll
    for (int k = 0; k < NK; ++k) {
      const uint2 sc = kscale[4 * k + ln.t], mn = kscale[D / 4 + 4 * k + ln.t];
      bq[k][0] = mul_half2(bq0[k][0], interleave_half2(sc.x, sc.y, false));
      bq[k][1] = mul_half2(bq0[k][1], interleave_half2(sc.x, sc.y, true));
      const uint32_t even = interleave_half2(mn.x, mn.y, false), odd = interleave_half2(mn.x, mn.y, true);
      const uint32_t amin[4] = {even, even, odd, odd};
      mma_16816(off, amin, bq0[k]);
    }
    float s[2][4] = {};  // sum of q' * code, in units of 2^-24 (codes_as_subnormal_half2)
    const uint32_t* words = reinterpret_cast<const uint32_t*>(stage + 4 * D);
#pragma unroll
    for (int k = 0; k < NK; ++k) {
      const int r = k * (4 / CPB) + key_row;
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // the two 16-token lane tiles, independent MMA chains
        const uint32_t* tile_words = words + h * (T::kTileBytes + 64) / 4;
        const uint32_t w0 = tile_words[r * 16 + ln.g], w1 = tile_words[r * 16 + ln.g + 8];
        const uint32_t a[4] = {codes_as_subnormal_half2<BITS>(w0, key_shift), codes_as_subnormal_half2<BITS>(w1, key_shift),
                               codes_as_subnormal_half2<BITS>(w0, key_shift + 8), codes_as_subnormal_half2<BITS>(w1, key_shift + 8)};
        mma_16816(s[h], a, bq[k]);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int r = 0; r < 4; ++r) s[h][r] = fmaf(s[h][r], kSubnormalCodeScale, off[r]) * p.scale;
    kivi::attend_tile_on_values(s, stage + T::kKeyBytes, tile * kTileTokens, score_mask(p, p.main_end), st,
                                values, pt, ln);
  });
  async_wait<0>();
  __syncthreads();
  values.finish(ln);
  write_tc_partial<D>(p, st, values.acc, Values::channel, stages, seq, blockIdx.x);
}

template <int D, int BITS, int VG>
__global__ void __launch_bounds__(kThreads) kivi_attend_kernel(AttendParams p) {
  p = for_query(p);
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarp;
  float* pt = reinterpret_cast<float*>(smem) + warp * kPtFloats;  // probabilities, per warp
  uint8_t* stages = smem + sizeof(float) * kWarps * kPtFloats;
  kivi::ring_or_codes<D, BITS>(p, min(p.format.get<KiviArgs>().group, D), pt, stages,
                               [&](int seq, int split) {
                                 attend_codes<D, BITS, VG>(p, seq, split, stages, pt);
                               });
}

template <int D, int BITS, int VG>
SplitKernel split_kernel(int value_group) {
  using T = KiviTile<D, BITS>;
  const kivi::ValueLayout vl{D, BITS, value_group};
  const size_t stages = static_cast<size_t>(kWarps) * 2 * T::stage_bytes(vl.block_bytes()) +
                        kivi::dense_rows_bytes<D, VG>();
  return {kivi_attend_kernel<D, BITS, VG>,
          sizeof(float) * kWarps * kPtFloats + std::max({stages, epilogue_bytes<kMmaHeads>(D), kivi::ring_stage_bytes<D>()}),
          "launch of kivi_attend_kernel"};
}

// Values have one scale per min(group, head_dim) channels (kivi::for_value_group picks the sums).
template <int D, int BITS>
SplitKernel for_value_group(const AttendParams& p) {
  const int vg = std::min(p.format.get<KiviArgs>().group, D);
  return kivi::for_value_group<D, BITS>(vg, [vg]<int VG>() { return split_kernel<D, BITS, VG>(vg); });
}

template <int BITS>
SplitKernel for_head_dim(const AttendParams& p) {
  return with_head_dim(p.head_dim, "cuda kivi attention",
                       [&]<int D>() { return for_value_group<D, BITS>(p); });
}

}  // namespace

SplitKernel kivi_split_kernel(const AttendParams& p, int bits) {
  if (bits == 2) return for_head_dim<2>(p);
  if (bits == 4) return for_head_dim<4>(p);
  throw Error("cuda kivi attention: " + std::to_string(bits) + " bits; expected 2 or 4");
}

}  // namespace veloxquant::cuda
