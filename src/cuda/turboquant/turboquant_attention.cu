// Split decode attention straight from TurboQuant-MSE records ([f32 norm][dim codes of b bits],
// the CPU codec's layout), on tensor cores (tc_decode.cuh, fp16_tile.cuh):
//  - The queries are rotated once per block (signs, then the orthonormal Hadamard transform):
//    q . x_t = ||x_t|| (R q) . codebook[codes_t]. Keys: A = codebook levels in fp16, looked up
//    two codes at a time in a table of level pairs, straight into the fragment (lane (g, t)
//    takes channels 16k' + 4t .. + 3 of tokens g and g + 8: k = 2t, 2t+1 are the first two,
//    k = 2t+8, 2t+9 the last two); B = the rotated query in the same order. The scores are then
//    scaled by each token's norm.
//  - Values: each tile's value levels are decoded into fp16 rows in shared memory (again two
//    codes per lookup) and summed like fp16 rows, the probabilities times each token's norm, in
//    the rotated space; combine.cu rotates the merged sum back once per query head.
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/attention/launchers.h"
#include "cuda/attention/tc_decode.cuh"
#include "cuda/common/check.cuh"
#include "cuda/fp16/fp16_tile.cuh"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

template <int D, int BITS>
struct Record {
  static constexpr int kBytes = 4 + D * BITS / 8;           // a multiple of 4 for D = 64, 128
  static constexpr int kStage = 2 * kTileTokens * kBytes + 16;  // keys, values, slack (16-aligned)
  static constexpr int kPairs = 1 << (2 * BITS);            // entries of a level-pair table
  // The 4 * n codes of channels c .. c + 4n - 1 of a record (c a multiple of 4), low bits first;
  // the word after a record may be read (the stage's slack covers the last one).
  template <int N>
  __device__ static uint32_t codes(const uint8_t* record, int c) {
    const uint32_t* w = reinterpret_cast<const uint32_t*>(record);
    const int bit = 32 + c * BITS, word = bit / 32, shift = bit % 32;
    if constexpr (32 % (4 * N * BITS) == 0) return w[word] >> shift;  // never spans two words
    else return __funnelshift_r(w[word], w[word + 1], shift);
  }
};

template <int D, int BITS, int MAXG>
__global__ void __launch_bounds__(kThreads) turboquant_attend_kernel(AttendParams p) {
  using R = Record<D, BITS>;
  using Tile = Fp16Tile<D>;
  constexpr int NK = D / 16;
  constexpr uint32_t kPairMask = R::kPairs - 1;
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const MmaLane ln(lane);
  float* q_s = reinterpret_cast<float*>(smem);
  uint32_t* key_pairs = reinterpret_cast<uint32_t*>(q_s + MAXG * D);  // fp16 (level[i], level[j]) at i + j * 2^bits
  uint32_t* value_pairs = key_pairs + R::kPairs;
  float* pt = reinterpret_cast<float*>(value_pairs + R::kPairs) + warp * kPtFloats;
  uint8_t* tiles = reinterpret_cast<uint8_t*>(reinterpret_cast<float*>(value_pairs + R::kPairs) + kWarps * kPtFloats);
  uint4* vt = reinterpret_cast<uint4*>(tiles + warp * Tile::kBytes);  // the warp's decoded value rows
  uint8_t* stages = tiles + kWarps * Tile::kBytes;
  uint8_t* buf[2] = {stages + (warp * 2) * R::kStage, stages + (warp * 2 + 1) * R::kStage};
  const int seq = blockIdx.y, split = blockIdx.x;
  load_queries<MAXG>(p, seq, q_s);
  for (int i = threadIdx.x; i < R::kPairs; i += kThreads) {
    const int lo = i & ((1 << BITS) - 1), hi = i >> BITS;
    key_pairs[i] = pack_half2(p.key_codebook[lo], p.key_codebook[hi]);
    value_pairs[i] = pack_half2(p.value_codebook[lo], p.value_codebook[hi]);
  }
  __syncthreads();
  // Rotate the queries: signs, then the Walsh-Hadamard butterflies, then 1/sqrt(D).
  for (int i = threadIdx.x; i < MAXG * D; i += kThreads) q_s[i] *= p.key_signs[i % D];
  __syncthreads();
  for (int len = 1; len < D; len <<= 1) {
    for (int i = threadIdx.x; i < MAXG * D / 2; i += kThreads) {
      const int h = i / (D / 2), pair = i % (D / 2);
      const int a = h * D + pair / len * 2 * len + pair % len;
      const float x = q_s[a], y = q_s[a + len];
      q_s[a] = x + y, q_s[a + len] = x - y;
    }
    __syncthreads();
  }
  // B fragments: the rotated query of head g (load_queries applied the softmax scale), channels
  // 16k + 4t .. + 3, times the transform's 1/sqrt(D).
  uint32_t bq[NK][2] = {};
  if (ln.g < p.group) {
    const float f = rsqrtf(static_cast<float>(D));
    const float* q = q_s + ln.g * D;
#pragma unroll
    for (int k = 0; k < NK; ++k) {
      const float4 c = *reinterpret_cast<const float4*>(q + 16 * k + 4 * ln.t);
      bq[k][0] = pack_half2(c.x * f, c.y * f), bq[k][1] = pack_half2(c.z * f, c.w * f);
    }
  }

  const uint8_t* kseq = p.keys.codes + seq * p.keys.stream_bytes;
  const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
  const auto fetch = [&](uint8_t* dst, int tile) {
    const size_t at = static_cast<size_t>(tile) * kTileTokens * R::kBytes;
    warp_copy_async(dst, kseq + at, kTileTokens * R::kBytes, lane);
    warp_copy_async(dst + kTileTokens * R::kBytes, vseq + at, kTileTokens * R::kBytes, lane);
  };
  TcSoftmax st;
  float acc[NK][4] = {};
  for_each_tile(p, split, buf, fetch, [&](uint8_t* stage, int tile) {
    const uint8_t* krec = stage;
    const uint8_t* vrec = stage + kTileTokens * R::kBytes;
    // Value rows: lane takes 8-channel chunks, 16 lanes per token, two tokens per pass.
#pragma unroll 4
    for (int i = lane; i < kTileTokens * Tile::kChunks; i += kWarp) {
      const int token = i / Tile::kChunks, chunk = i % Tile::kChunks;
      const uint32_t codes = R::template codes<2>(vrec + token * R::kBytes, 8 * chunk);
      uint4 row;
      row.x = value_pairs[codes & kPairMask];
      row.y = value_pairs[(codes >> (2 * BITS)) & kPairMask];
      row.z = value_pairs[(codes >> (4 * BITS)) & kPairMask];
      row.w = value_pairs[(codes >> (6 * BITS)) & kPairMask];
      vt[Tile::slot(token, chunk)] = row;
    }
    // Scores: A = key levels (tokens g, g + 8 of each half), two lookups per token and k step.
    float s[2][4] = {};
#pragma unroll
    for (int k = 0; k < NK; ++k) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t c0 = R::template codes<1>(krec + (16 * h + ln.g) * R::kBytes, 16 * k + 4 * ln.t);
        const uint32_t c1 = R::template codes<1>(krec + (16 * h + ln.g + 8) * R::kBytes, 16 * k + 4 * ln.t);
        const uint32_t a[4] = {key_pairs[c0 & kPairMask], key_pairs[c1 & kPairMask],
                               key_pairs[(c0 >> (2 * BITS)) & kPairMask], key_pairs[(c1 >> (2 * BITS)) & kPairMask]};
        mma_16816(s[h], a, bq[k]);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float n0 = *reinterpret_cast<const float*>(krec + (16 * h + ln.g) * R::kBytes);
      const float n1 = *reinterpret_cast<const float*>(krec + (16 * h + ln.g + 8) * R::kBytes);
      s[h][0] *= n0, s[h][1] *= n0, s[h][2] *= n1, s[h][3] *= n1;
    }
    attend_tile_values<D>(s, vt, 1.0f, tile * kTileTokens, p.main_end, st, acc, pt, ln,
                          reinterpret_cast<const float*>(vrec), R::kBytes / 4);
  });
  async_wait<0>();
  __syncthreads();
  write_tc_partial<D>(p, st, acc, fp16_tile_channel, tiles, seq, split);
}

template <int D, int BITS, int MAXG>
SplitKernel split_kernel() {
  using R = Record<D, BITS>;
  const size_t work = static_cast<size_t>(kWarps) * (Fp16Tile<D>::kBytes + 2 * R::kStage);
  return {turboquant_attend_kernel<D, BITS, MAXG>,
          sizeof(float) * (MAXG * D + 2 * R::kPairs + kWarps * kPtFloats) + std::max(work, epilogue_bytes<kMmaHeads>(D)),
          "launch of turboquant_attend_kernel"};
}

template <int D, int BITS>
SplitKernel for_group(const AttendParams& p) {
  if (p.group <= 4) return split_kernel<D, BITS, 4>();
  return split_kernel<D, BITS, 8>();
}

template <int D>
SplitKernel for_bits(const AttendParams& p, int bits) {
  if (bits == 2) return for_group<D, 2>(p);
  if (bits == 3) return for_group<D, 3>(p);
  if (bits == 4) return for_group<D, 4>(p);
  throw Error("cuda turboquant attention: bits " + std::to_string(bits) + "; expected 2, 3 or 4");
}

}  // namespace

SplitKernel turboquant_split_kernel(const AttendParams& p, int bits) {
  if (p.head_dim == 128) return for_bits<128>(p, bits);
  if (p.head_dim == 64) return for_bits<64>(p, bits);
  throw Error("cuda turboquant attention: head_dim " + std::to_string(p.head_dim) + "; expected 64 or 128");
}

}  // namespace veloxquant::cuda
