// KIVI's value blocks in the split-decode attention kernels on tensor cores (tc_decode.cuh),
// shared by the kernels of the methods that store KIVI values (kivi_attention.cu,
// qjl/qjl_attention.cu, kitty/kitty_attention.cu):
//  - ValueSums: the fused region's values straight from the codes. A = V^T codes, lane (g, t)
//    reads in quad t the words of channels g and g + 8 (one word holds 4 tokens x cpb channels),
//    B = probabilities times each token's scale per value group, tokens 0 and 2 then 1 and 3; one
//    more MMA per 16 tokens, A = each group's minimums, B = the probabilities, gives
//    sum(p * min) per group and head.
//  - DenseValues: the same sums where the codes are one dense stream (ValueLayout::tiled false):
//    each tile's values are decoded to fp16 rows in the warp's own tile and summed as fp16 rows
//    are (fp16_tile.cuh).
//  - attend_ring: the split over the ring of fp16 rows (the residual window and the keys of a
//    partial key group); ring_or_codes: which split a block runs;
//  - attend_tile_on_values: a tile's scores into the online softmax and onto its values.
#pragma once

#include <cuda_fp16.h>

#include <type_traits>

#include "cuda/attention/tc_decode.cuh"
#include "cuda/fp16/fp16_tile.cuh"
#include "cuda/kivi/kivi_layout.cuh"

namespace veloxquant::cuda::kivi {

// The O^T accumulators of BITS-bit values with one scale per VG channels.
template <int D, int BITS, int VG>
struct ValueSums {
  static constexpr int kCpb = 8 / BITS, kRows = D / (16 * kCpb), kGroups = D / VG, kTiles = D / 16;
  float acc[kTiles][4] = {};  // sum of p' * code, in units of 2^-24 (codes_as_subnormal_half2)
  float vmin[1][4] = {};      // C layout: row v = sum of p * group v's minimum, per head

  __device__ void rescale(const float (&alpha)[2]) {
    cuda::rescale(acc, alpha);
    cuda::rescale(vmin, alpha);
  }

  // The 8 value blocks (32 tokens) of a tile at `blocks`, weighted by the warp's probabilities pt.
  __device__ void add_tile(const uint8_t* blocks, const float* pt, const MmaLane& ln) {
    const ValueLayout vl{D, BITS, VG};
    const int vblock = vl.block_bytes();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint8_t* block = blocks + (4 * h + ln.t) * vblock;
      const uint2* params = reinterpret_cast<const uint2*>(block + vl.quad_bytes());  // 4 tokens each
      const float4 pr = *reinterpret_cast<const float4*>(pt + ln.g * kPtStride + 16 * h + 4 * ln.t);
      const uint32_t pb[2] = {pack_half2(pr.x, pr.z), pack_half2(pr.y, pr.w)};  // tokens 0, 2 | 1, 3
      // The minimums: A row v = group v's minimum of each token, B = the probabilities.
      uint32_t amin[4] = {};
      if (ln.g < kGroups) {
        const uint2 mn = params[kGroups + ln.g];
        amin[0] = interleave_half2(mn.x, mn.y, false), amin[2] = interleave_half2(mn.x, mn.y, true);
      }
      mma_16816(vmin[0], amin, pb);
      uint32_t bv[kGroups][2];
#pragma unroll
      for (int v = 0; v < kGroups; ++v) {
        const uint2 sc = params[v];
        bv[v][0] = mul_half2(pb[0], interleave_half2(sc.x, sc.y, false));
        bv[v][1] = mul_half2(pb[1], interleave_half2(sc.x, sc.y, true));
      }
      const uint32_t* words = reinterpret_cast<const uint32_t*>(block);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const uint32_t w0 = words[r * 16 + ln.g], w1 = words[r * 16 + ln.g + 8];
#pragma unroll
        for (int kk = 0; kk < kCpb; ++kk) {
          const uint32_t a[4] = {codes_as_subnormal_half2<BITS>(w0, BITS * kk), codes_as_subnormal_half2<BITS>(w1, BITS * kk),
                                 codes_as_subnormal_half2<BITS>(w0, BITS * kk + 8),
                                 codes_as_subnormal_half2<BITS>(w1, BITS * kk + 8)};
          mma_16816(acc[r * kCpb + kk], a, bv[(r * 16 * kCpb + 16 * kk) / VG]);
        }
      }
    }
  }

  // After the last tile: the minimums' share (row v of vmin, held by the lanes g = v) joins every
  // channel of group v, and the codes' sums are scaled back from units of 2^-24.
  __device__ void finish(const MmaLane& ln) {
#pragma unroll
    for (int m = 0; m < kTiles; ++m) {
      const int v = channel(m, 0) / VG;
      const float h0 = __shfl_sync(0xffffffffu, vmin[0][0], 4 * v + ln.t);
      const float h1 = __shfl_sync(0xffffffffu, vmin[0][1], 4 * v + ln.t);
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[m][r] = fmaf(acc[m][r], kSubnormalCodeScale, r & 1 ? h1 : h0);
    }
  }

  // m tile r * cpb + kk holds channels r * 16 cpb + 16 kk + row.
  __host__ __device__ static int channel(int m, int row) { return m / kCpb * 16 * kCpb + 16 * (m % kCpb) + row; }
};

// The O^T accumulators of BITS-bit values in the dense layout, `group` channels per scale.
template <int D, int BITS>
struct DenseValues {
  using Tile = Fp16Tile<D>;
  uint4* rows;  // the warp's tile of decoded rows
  int group;
  float acc[D / 16][4] = {};

  __device__ DenseValues(uint4* rows, int group) : rows(rows), group(group) {}
  __device__ void rescale(const float (&alpha)[2]) { cuda::rescale(acc, alpha); }

  __device__ void add_tile(const uint8_t* blocks, const float* pt, const MmaLane& ln) {
    const ValueLayout vl{D, BITS, group};
    for (int i = ln.g * 4 + ln.t; i < kTileTokens * Tile::kChunks; i += kWarp) {
      const int token = i / Tile::kChunks, chunk = i % Tile::kChunks;
      __align__(16) __half row[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) row[j] = __float2half_rn(vl.decode(blocks, token, 8 * chunk + j));
      rows[Tile::slot(token, chunk)] = *reinterpret_cast<const uint4*>(row);
    }
    __syncwarp();
    sum_value_rows<D>(rows, pt, acc, ln);
  }

  __device__ void finish(const MmaLane&) {}
  __host__ __device__ static int channel(int m, int row) { return 16 * m + row; }
};

// ValueSums, or DenseValues for VG == 0 (the dense layout, whatever its group).
template <int D, int BITS, int VG>
using ValuesOf = std::conditional_t<VG == 0, DenseValues<D, BITS>, ValueSums<D, BITS, VG == 0 ? 16 : VG>>;

// Shared memory DenseValues needs beside a kernel's stages: one tile of decoded rows per warp.
template <int D, int VG>
__host__ __device__ constexpr size_t dense_rows_bytes() {
  return VG == 0 ? static_cast<size_t>(kWarps) * Fp16Tile<D>::kBytes : 0;
}

// The sums a warp keeps: DenseValues decode into the warp's tile of rows, which follows the
// kWarps x 2 stages of stage_bytes each.
template <int D, int BITS, int VG>
__device__ ValuesOf<D, BITS, VG> warp_values(uint8_t* stages, int stage_bytes, int warp, int group) {
  if constexpr (VG == 0) {
    uint8_t* rows = stages + kWarps * 2 * stage_bytes + warp * Fp16Tile<D>::kBytes;
    return DenseValues<D, BITS>(reinterpret_cast<uint4*>(rows), group);
  } else {
    return ValueSums<D, BITS, VG>{};
  }
}

// make.template operator()<VG>() for the ValuesOf that sums values of `group` channels per scale:
// lane quads take the MMA on their codes for groups of 32, 64, 128 or head_dim channels; any other
// group (16 channels, 96 of 128) and the dense layout are decoded per tile (VG 0), whose decode
// reads both layouts.
template <int D, int BITS, class Make>
auto for_value_group(int group, Make&& make) {
  if constexpr (D % (16 * 8 / BITS) == 0) {
    if (ValueLayout{D, BITS, group}.tiled()) {
      if (group == 32) return make.template operator()<32>();
      if constexpr (D % 64 == 0)
        if (group == 64) return make.template operator()<64>();
      if constexpr (D % 128 == 0)
        if (group == 128) return make.template operator()<128>();
      if (group == D) return make.template operator()<D>();
    }
  }
  return make.template operator()<0>();
}

// A tile's scores s (C layout, scaled) join the online softmax and weight its 8 value blocks
// (Values: ValuesOf); the kernels whose values are KIVI's end each tile with it.
template <class Values>
__device__ void attend_tile_on_values(float (&s)[2][4], const uint8_t* value_blocks, int first_token,
                                      const ScoreMask& mask, TcSoftmax& st, Values& values, float* pt,
                                      const MmaLane& ln) {
  mask_tile(s, ln, first_token, mask);
  float alpha[2];
  st.update(s, alpha);
  values.rescale(alpha);
  stage_probabilities(pt, s, ln);
  __syncwarp();
  values.add_tile(value_blocks, pt, ln);
  __syncwarp();
}

// The ring split: keys of [key_encoded, tokens) are fp16 rows of the ring; values of
// [key_encoded, value_encoded) still come from codes (decoded to fp16 here), the rest from rows.
// At most residual + key group tokens: kRingWarps warps take 32-token tiles in turn, stage them in
// shared memory and attend them as the fp16 kernel does (fp16_tile.cuh). Rows of tokens past the
// end are old ring rows, finite, and masked.
inline constexpr int kRingWarps = 2;
template <int D>
__host__ __device__ constexpr size_t ring_stage_bytes() {
  return static_cast<size_t>(kRingWarps) * 2 * Fp16Tile<D>::kBytes;
}

template <int D, int BITS>
__device__ void attend_ring(const AttendParams& p, int seq, int value_group, float* pt, uint8_t* stages) {
  using Tile = Fp16Tile<D>;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const MmaLane ln(lane);
  const ValueLayout vl{D, BITS, value_group};
  uint32_t bq[D / 16][2];
  load_query_fragments<D>(p, seq, ln, bq);
  TcSoftmax st;
  float acc[D / 16][4] = {};
  if (warp < kRingWarps) {
    const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
    const __half* kring = reinterpret_cast<const __half*>(p.keys.ring) + static_cast<size_t>(seq) * p.keys.ring_tokens * D;
    const __half* vring = reinterpret_cast<const __half*>(p.values.ring) + static_cast<size_t>(seq) * p.values.ring_tokens * D;
    uint4* kt = reinterpret_cast<uint4*>(stages + warp * 2 * Tile::kBytes);
    uint4* vt = kt + Tile::kBytes / 16;
    for (int t0 = p.key_encoded + warp * kTileTokens; t0 < p.tokens; t0 += kRingWarps * kTileTokens) {
      for (int i = lane; i < kTileTokens * Tile::kChunks; i += kWarp) {
        const int token = i / Tile::kChunks, chunk = i % Tile::kChunks, tok = t0 + token;
        const int slot = Tile::slot(token, chunk);
        copy16_async(kt + slot, reinterpret_cast<const uint4*>(kring + static_cast<size_t>(tok % p.keys.ring_tokens) * D) + chunk);
        if (tok >= p.value_encoded) {
          copy16_async(vt + slot, reinterpret_cast<const uint4*>(vring + static_cast<size_t>(tok % p.values.ring_tokens) * D) + chunk);
        } else {
          __align__(16) __half row[8];
#pragma unroll
          for (int j = 0; j < 8; ++j)
            row[j] = __float2half_rn(vl.decode(vseq, p.values.slot(tok), 8 * chunk + j));
          vt[slot] = *reinterpret_cast<const uint4*>(row);
        }
      }
      async_commit();
      async_wait<0>();
      __syncwarp();
      attend_fp16_tile<D>(kt, vt, bq, p.scale, t0, score_mask(p, p.tokens), st, acc, pt, ln);
    }
  }
  __syncthreads();  // the staging areas end where the epilogue's begin
  write_tc_partial<D>(p, st, acc, fp16_tile_channel, stages, seq, blockIdx.x);
}

// A kernel's split of the stream: the ring split, when there is one, is split 0 (it starts first,
// beside the long main splits); every other split runs codes(seq, split of the coded part).
template <int D, int BITS, class Codes>
__device__ void ring_or_codes(const AttendParams& p, int value_group, float* pt, uint8_t* stages,
                              Codes&& codes) {
  const int seq = blockIdx.y, ring_splits = p.splits - p.main_splits;
  if (static_cast<int>(blockIdx.x) < ring_splits) attend_ring<D, BITS>(p, seq, value_group, pt, stages);
  else codes(seq, static_cast<int>(blockIdx.x) - ring_splits);
}

}  // namespace veloxquant::cuda::kivi
