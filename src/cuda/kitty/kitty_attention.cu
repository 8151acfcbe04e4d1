// Split decode attention over KITTY's codes. A block's key codes are two token-major streams whose
// channel order the block's mask decides, so each warp decodes its 32-token tile of keys into fp16
// rows in shared memory, a lane per channel (its grid and its rank within its kind read once per
// tile), and scores them on tensor cores as the fp16 kernel does (fp16_tile.cuh); values are
// KIVI's and are summed on their codes (kivi_values.cuh). The ring of fp16 rows is one more split,
// as KIVI's. Only the codes cross from global memory, by cp.async, two tiles in flight.
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/attention/head_dims.h"
#include "cuda/attention/tc_decode.cuh"
#include "cuda/common/check.cuh"
#include "cuda/fp16/fp16_tile.cuh"
#include "cuda/kitty/kitty_launch.h"
#include "cuda/kitty/kitty_layout.cuh"
#include "cuda/kivi/kivi_values.cuh"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

__host__ __device__ constexpr int round16(int n) { return (n + 15) / 16 * 16; }

// A tile's bytes in a stage: the block's mask and grids, the tile's codes of either kind and its 8
// value blocks. Each key part is copied from the 4-byte word holding its first byte (blocks start
// at any even byte), so up to 3 bytes ride along on either side.
struct KittyStage {
  int low, high, values, bytes;
  __host__ __device__ static KittyStage of(const kitty::KeyLayout& kl, int value_block) {
    KittyStage s{};
    s.low = round16(kl.low_offset() + 6);
    s.high = s.low + round16(kTileTokens * kl.low_channels() * kl.bits / 8 + 6);
    s.values = s.high + round16(kTileTokens * kl.boosted * kl.high_bits / 8 + 6);
    s.bytes = s.values + 8 * value_block;
    return s;
  }
};

__device__ inline int misalign(const uint8_t* at) {
  return static_cast<int>(reinterpret_cast<uintptr_t>(at) & 3u);
}

// Copies [at, at + bytes) as whole words into dst; the part starts misalign(at) bytes into dst.
__device__ inline void copy_part(uint8_t* dst, const uint8_t* at, int bytes, int lane) {
  const int lead = misalign(at);
  warp_copy_words_async(dst, at - lead, (lead + bytes + 3) & ~3, lane);
}

// The warp's tile of keys decoded into fp16 rows (Fp16Tile layout) as the CPU codec decodes them:
// min + scale * code per channel. The parts were staged from `block` and the tile's two slices of
// codes, whose first bytes sit misalign() bytes into their parts.
template <int D>
__device__ void decode_keys(const uint8_t* stage, const KittyStage& st, const kitty::KeyLayout& kl,
                            const uint8_t* block, const uint8_t* low, const uint8_t* high, uint4* rows,
                            int lane) {
  const uint8_t* mask = stage + misalign(block);
  const uint16_t* grids = reinterpret_cast<const uint16_t*>(mask + kl.grids_offset());
  const uint8_t* low_codes = stage + st.low + misalign(low);
  const uint8_t* high_codes = stage + st.high + misalign(high);
  __half* out = reinterpret_cast<__half*>(rows);
  for (int c = lane; c < D; c += kWarp) {
    int below = __popc(mask[c / 8] & ((1u << (c % 8)) - 1u));
    for (int i = 0; i < c / 8; ++i) below += __popc(mask[i]);
    const bool boosted = (mask[c / 8] >> (c % 8) & 1u) != 0;
    const float scale = __half2float(__ushort_as_half(grids[c])),
                mn = __half2float(__ushort_as_half(grids[D + c]));
    const uint8_t* codes = boosted ? high_codes : low_codes;
    const int bits = boosted ? kl.high_bits : kl.bits, per_token = boosted ? kl.boosted : kl.low_channels();
    const int rank = boosted ? below : c - below;
    const unsigned top = (1u << bits) - 1u;
#pragma unroll 4
    for (int t = 0; t < kTileTokens; ++t) {
      const int bit = (t * per_token + rank) * bits;  // codes never straddle a byte: bits divides 8
      const unsigned code = codes[bit >> 3] >> (bit & 7) & top;
      const float v = __fadd_rn(mn, __fmul_rn(scale, static_cast<float>(code)));
      out[Fp16Tile<D>::slot(t, c / 8) * 8 + c % 8] = __float2half_rn(v);
    }
  }
}

template <int D, int VBITS, int VG>
__device__ void attend_codes(const AttendParams& p, int seq, int main_split, uint8_t* stages, float* pt) {
  using Tile = Fp16Tile<D>;
  const KittyArgs a = p.format.get<KittyArgs>();
  const kitty::KeyLayout kl{D, a.bits, a.high_bits, a.boosted, a.group};
  const kivi::ValueLayout vl{D, VBITS, min(a.group, D)};
  const int vblock = vl.block_bytes();
  const KittyStage sl = KittyStage::of(kl, vblock);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const MmaLane ln(lane);
  uint8_t* buf[2] = {stages + (warp * 2) * sl.bytes, stages + (warp * 2 + 1) * sl.bytes};
  // The warp's tile of decoded rows: the keys, and after their scores the values where they are
  // decoded too (kivi::DenseValues takes the same tile).
  uint4* rows = reinterpret_cast<uint4*>(stages + kWarps * 2 * sl.bytes + warp * Tile::kBytes);
  uint32_t bq[D / 16][2];
  load_query_fragments<D>(p, seq, ln, bq);

  const uint8_t* kseq = p.keys.codes + seq * p.keys.stream_bytes;
  const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
  // A tile's key block and the first bytes of its codes of either kind, in global memory.
  const auto key_parts = [&](int tile, const uint8_t*& block, const uint8_t*& low, const uint8_t*& high) {
    const int t0 = p.keys.slot(tile * kTileTokens), in_block = t0 % kl.group;
    block = kseq + static_cast<size_t>(t0 / kl.group) * kl.block_bytes();
    low = block + kl.low_offset() + in_block * kl.low_channels() * kl.bits / 8;
    high = block + kl.high_offset() + in_block * kl.boosted * kl.high_bits / 8;
  };
  const auto fetch = [&](uint8_t* dst, int tile) {
    const uint8_t *block, *low, *high;
    key_parts(tile, block, low, high);
    copy_part(dst, block, kl.low_offset(), lane);
    copy_part(dst + sl.low, low, kTileTokens * kl.low_channels() * kl.bits / 8, lane);
    copy_part(dst + sl.high, high, kTileTokens * kl.boosted * kl.high_bits / 8, lane);
    const int t0 = p.keys.slot(tile * kTileTokens);
    warp_copy_async(dst + sl.values, vseq + static_cast<size_t>(t0 / 4) * vblock, 8 * vblock, lane);
  };

  TcSoftmax st;
  using Values = kivi::ValuesOf<D, VBITS, VG>;
  Values values = kivi::warp_values<D, VBITS, VG>(stages, sl.bytes, warp, vl.group);
  for_each_tile(p, main_split, buf, fetch, [&](uint8_t* stage, int tile) {
    const uint8_t *block, *low, *high;
    key_parts(tile, block, low, high);
    decode_keys<D>(stage, sl, kl, block, low, high, rows, lane);
    __syncwarp();
    float s[2][4] = {};
    fp16_tile_scores<D>(rows, bq, s, ln);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int r = 0; r < 4; ++r) s[h][r] *= p.scale;
    kivi::attend_tile_on_values(s, stage + sl.values, tile * kTileTokens, score_mask(p, p.main_end), st,
                                values, pt, ln);
  });
  async_wait<0>();
  __syncthreads();
  values.finish(ln);
  write_tc_partial<D>(p, st, values.acc, Values::channel, stages, seq, blockIdx.x);
}

template <int D, int VBITS, int VG>
__global__ void __launch_bounds__(kThreads) kitty_attend_kernel(AttendParams p) {
  p = for_query(p);
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarp;
  float* pt = reinterpret_cast<float*>(smem) + warp * kPtFloats;  // probabilities, per warp
  uint8_t* stages = smem + sizeof(float) * kWarps * kPtFloats;
  kivi::ring_or_codes<D, VBITS>(p, min(p.format.get<KittyArgs>().group, D), pt, stages,
                                [&](int seq, int split) {
                                  attend_codes<D, VBITS, VG>(p, seq, split, stages, pt);
                                });
}

template <int D, int VBITS, int VG>
SplitKernel split_kernel(const KittyArgs& a) {
  const kitty::KeyLayout kl{D, a.bits, a.high_bits, a.boosted, a.group};
  const int vblock = kivi::ValueLayout{D, VBITS, std::min(a.group, D)}.block_bytes();
  const size_t work = static_cast<size_t>(kWarps) *
                      (2 * KittyStage::of(kl, vblock).bytes + Fp16Tile<D>::kBytes);
  return {kitty_attend_kernel<D, VBITS, VG>,
          sizeof(float) * kWarps * kPtFloats +
              std::max({work, epilogue_bytes<kMmaHeads>(D), kivi::ring_stage_bytes<D>()}),
          "launch of kitty_attend_kernel"};
}

// Values have one scale per min(group, head_dim) channels (kivi::for_value_group picks the sums).
template <int D, int VBITS>
SplitKernel for_value_group(const AttendParams& p) {
  const KittyArgs a = p.format.get<KittyArgs>();
  return kivi::for_value_group<D, VBITS>(std::min(a.group, D),
                                         [a]<int VG>() { return split_kernel<D, VBITS, VG>(a); });
}

template <int VBITS>
SplitKernel for_head_dim(const AttendParams& p) {
  return with_head_dim(p.head_dim, "cuda kitty attention",
                       [&]<int D>() { return for_value_group<D, VBITS>(p); });
}

}  // namespace

SplitKernel kitty_split_kernel(const AttendParams& p, int vbits) {
  if (vbits == 2) return for_head_dim<2>(p);
  if (vbits == 4) return for_head_dim<4>(p);
  throw Error("cuda kitty attention: vbits " + std::to_string(vbits) + "; expected 2 or 4");
}

}  // namespace veloxquant::cuda
