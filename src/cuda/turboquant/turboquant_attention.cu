// Split decode attention straight from TurboQuant records (the CPU codecs' layouts), on tensor
// cores (tc_decode.cuh, fp16_tile.cuh). turboquant_mse: [f32 norm][dim codes of b bits] for keys
// and values; turboquant_prod's keys: [f32 norm][f32 rho][dim codes of b-1 bits][dim sign bits].
//  - The queries are rotated once per block (signs, then the orthonormal Hadamard transform;
//    at head_dim 80 and 96 the dense rotation): q . x_t = ||x_t|| (R q) . codebook[codes_t].
//    Keys: A = codebook levels in fp16, looked up two codes at a time in a table of level pairs,
//    straight into the fragment (lane (g, t) takes channels 16k' + 4t .. + 3 of tokens g and
//    g + 8: k = 2t, 2t+1 are the first two, k = 2t+8, 2t+9 the last two); B = the rotated query
//    in the same order. The scores are then scaled by each token's norm.
//  - turboquant_prod adds sqrt(pi/2) / dim * rho_t (S R q) . z_t: the rotated query is sketched
//    once per block, and a second MMA per k step takes the sign bits as A (+-1 in fp16, looked up
//    two signs at a time) against B = S R q.
//  - Values: each tile's value levels are decoded into fp16 rows in shared memory (again two
//    codes per lookup) and summed like fp16 rows, the probabilities times each token's norm, in
//    the rotated space; combine.cu rotates the merged sum back once per query head.
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/attention/head_dims.h"
#include "cuda/attention/tc_decode.cuh"
#include "cuda/common/check.cuh"
#include "cuda/common/rotation.cuh"
#include "cuda/fp16/fp16_tile.cuh"
#include "cuda/turboquant/turboquant_launch.h"
#include "cuda/turboquant/turboquant_values.cuh"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

// Record sizes and shared tables for b-bit values and keys (PROD: b-1 code bits and a sign).
template <int D, int BITS, bool PROD>
struct Layout {
  static constexpr int kKeyBits = PROD ? BITS - 1 : BITS;
  static constexpr int kKeyHeader = PROD ? 8 : 4;                         // norm (and rho)
  static constexpr int kKeyBytes = kKeyHeader + D * kKeyBits / 8 + (PROD ? D / 8 : 0);
  static constexpr int kValueBytes = 4 + D * BITS / 8;
  static constexpr int kStage = kTileTokens * (kKeyBytes + kValueBytes) + 16;  // keys, values, slack
  static constexpr int kKeyPairs = 1 << (2 * kKeyBits), kValuePairs = 1 << (2 * BITS);
  static constexpr int kSignPairs = PROD ? 4 : 0;
  static constexpr int kQueryFloats = (PROD ? 2 : 1) * D;  // per head: R q (and S R q)
  static constexpr bool kKeyWords = kKeyBytes % 4 == 0;    // key records 4-byte aligned
  // Records stay 2-aligned (those not 4-aligned are read as 16-bit halves, device_math.cuh) and
  // the tables end 16-aligned (the tiles after them take cp.async).
  static_assert(kKeyBytes % 2 == 0 && kValueBytes % 2 == 0 && kStage % 16 == 0);
  static_assert((kKeyPairs + kValuePairs + kSignPairs) % 4 == 0);
};

template <int D, int BITS, bool PROD, int MAXG>
__global__ void __launch_bounds__(kThreads) turboquant_attend_kernel(AttendParams p) {
  p = for_query(p);
  using L = Layout<D, BITS, PROD>;
  using Tile = Fp16Tile<D>;
  constexpr int NK = D / 16;
  constexpr uint32_t kKeyMask = L::kKeyPairs - 1;
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const MmaLane ln(lane);
  float* q_s = reinterpret_cast<float*>(smem);
  float* sq_s = q_s + MAXG * D;  // prod: the sketched rotated queries
  uint32_t* key_pairs = reinterpret_cast<uint32_t*>(q_s + MAXG * L::kQueryFloats);  // fp16 (level[i], level[j]) at i + j * 2^bits
  uint32_t* value_pairs = key_pairs + L::kKeyPairs;
  uint32_t* sign_pairs = value_pairs + L::kValuePairs;  // prod: fp16 (+-1, +-1), bit 1 is +1
  float* after_tables = reinterpret_cast<float*>(sign_pairs + L::kSignPairs);
  float* pt = after_tables + warp * kPtFloats;
  uint8_t* tiles = reinterpret_cast<uint8_t*>(after_tables + kWarps * kPtFloats);
  uint4* vt = reinterpret_cast<uint4*>(tiles + warp * Tile::kBytes);  // the warp's decoded value rows
  uint8_t* stages = tiles + kWarps * Tile::kBytes;
  uint8_t* buf[2] = {stages + (warp * 2) * L::kStage, stages + (warp * 2 + 1) * L::kStage};
  const int seq = blockIdx.y, split = blockIdx.x;
  load_queries<MAXG>(p, seq, q_s);
  const TurboQuantArgs ta = p.format.get<TurboQuantArgs>();
  fill_level_pairs<L::kKeyBits, kThreads>(key_pairs, ta.key_codebook);
  fill_level_pairs<BITS, kThreads>(value_pairs, ta.value_codebook);
  for (int i = threadIdx.x; i < L::kSignPairs; i += kThreads)
    sign_pairs[i] = pack_half2(i & 1 ? 1.0f : -1.0f, i & 2 ? 1.0f : -1.0f);
  __syncthreads();
  // Rotate the queries: signs, then the Walsh-Hadamard butterflies, then 1/sqrt(D) (in the B
  // fragments below); at head sizes that are not powers of two, the dense rotation.
  constexpr bool kDense = (D & (D - 1)) != 0;
  rotate_rows<D, MAXG, kThreads>(q_s, ta.key_signs, ta.key_rotation);
  if constexpr (PROD) {  // S (R q) up to the 1/sqrt(D) both B fragments take below
    for (int i = threadIdx.x; i < p.group * D; i += kThreads) {
      const int j = i % D;  // row j of S; adjacent threads read adjacent floats of S^T
      const float* q = q_s + i / D * D;
      float sum = 0;
      for (int c = 0; c < D; ++c) sum = fmaf(ta.key_sketch[c * D + j], q[c], sum);
      sq_s[i] = sum;
    }
    __syncthreads();
  }
  // B fragments: the rotated query of head g (load_queries applied the softmax scale), channels
  // 16k + 4t .. + 3, times the Hadamard transform's 1/sqrt(D); prod's sketched query likewise.
  uint32_t bq[NK][2] = {}, bs[PROD ? NK : 1][2] = {};
  if (ln.g < p.group) {
    const float f = kDense ? 1.0f : rsqrtf(static_cast<float>(D));
#pragma unroll
    for (int k = 0; k < NK; ++k) {
      const float4 c = *reinterpret_cast<const float4*>(q_s + ln.g * D + 16 * k + 4 * ln.t);
      bq[k][0] = pack_half2(c.x * f, c.y * f), bq[k][1] = pack_half2(c.z * f, c.w * f);
      if constexpr (PROD) {
        const float4 z = *reinterpret_cast<const float4*>(sq_s + ln.g * D + 16 * k + 4 * ln.t);
        bs[k][0] = pack_half2(z.x * f, z.y * f), bs[k][1] = pack_half2(z.z * f, z.w * f);
      }
    }
  }

  const uint8_t* kseq = p.keys.codes + seq * p.keys.stream_bytes;
  const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
  const auto fetch = [&](uint8_t* dst, int tile) {
    const size_t first = p.keys.slot(tile * kTileTokens);
    warp_copy_async(dst, kseq + first * L::kKeyBytes, kTileTokens * L::kKeyBytes, lane);
    warp_copy_async(dst + kTileTokens * L::kKeyBytes, vseq + first * L::kValueBytes, kTileTokens * L::kValueBytes, lane);
  };
  TcSoftmax st;
  float acc[NK][4] = {};
  for_each_tile(p, split, buf, fetch, [&](uint8_t* stage, int tile) {
    const uint8_t* krec = stage;
    const uint8_t* vrec = stage + kTileTokens * L::kKeyBytes;
    decode_value_tile<D, BITS>(vrec, value_pairs, vt, lane);
    // Scores: A = key levels (tokens g, g + 8 of each half), two lookups per token and k step;
    // prod: A = the signs, against the sketched query.
    float s[2][4] = {}, z[2][4] = {};
#pragma unroll
    for (int k = 0; k < NK; ++k) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint8_t* r0 = krec + (16 * h + ln.g) * L::kKeyBytes;
        const uint8_t* r1 = r0 + 8 * L::kKeyBytes;
        constexpr int kb = L::kKeyBits;
        const uint32_t c0 = packed_codes<kb, 1, L::kKeyWords>(r0, 8 * L::kKeyHeader, 16 * k + 4 * ln.t);
        const uint32_t c1 = packed_codes<kb, 1, L::kKeyWords>(r1, 8 * L::kKeyHeader, 16 * k + 4 * ln.t);
        const uint32_t a[4] = {key_pairs[c0 & kKeyMask], key_pairs[c1 & kKeyMask],
                               key_pairs[(c0 >> (2 * kb)) & kKeyMask], key_pairs[(c1 >> (2 * kb)) & kKeyMask]};
        mma_16816(s[h], a, bq[k]);
        if constexpr (PROD) {
          constexpr int kSignBit = 8 * (L::kKeyBytes - D / 8);  // the signs end the record
          const uint32_t z0 = packed_codes<1, 1, L::kKeyWords>(r0, kSignBit, 16 * k + 4 * ln.t);
          const uint32_t z1 = packed_codes<1, 1, L::kKeyWords>(r1, kSignBit, 16 * k + 4 * ln.t);
          const uint32_t sa[4] = {sign_pairs[z0 & 3], sign_pairs[z1 & 3], sign_pairs[(z0 >> 2) & 3],
                                  sign_pairs[(z1 >> 2) & 3]};
          mma_16816(z[h], sa, bs[k]);
        }
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint8_t* r0 = krec + (16 * h + ln.g) * L::kKeyBytes;
      const uint8_t* r1 = krec + (16 * h + ln.g + 8) * L::kKeyBytes;
      const float n0 = load_f32<L::kKeyWords>(r0), n1 = load_f32<L::kKeyWords>(r1);
      s[h][0] *= n0, s[h][1] *= n0, s[h][2] *= n1, s[h][3] *= n1;
      if constexpr (PROD) {
        constexpr float kQjl = 1.2533141373155003f / D;  // sqrt(pi / 2) / D
        const float w0 = kQjl * load_f32<L::kKeyWords>(r0 + 4), w1 = kQjl * load_f32<L::kKeyWords>(r1 + 4);
        s[h][0] += w0 * z[h][0], s[h][1] += w0 * z[h][1], s[h][2] += w1 * z[h][2], s[h][3] += w1 * z[h][3];
      }
    }
    attend_tile_values<D>(s, vt, 1.0f, tile * kTileTokens, score_mask(p, p.main_end), st, acc, pt, ln, vrec,
                          L::kValueBytes);
  });
  async_wait<0>();
  __syncthreads();
  write_tc_partial<D>(p, st, acc, fp16_tile_channel, tiles, seq, split);
}

template <int D, int BITS, bool PROD, int MAXG>
SplitKernel split_kernel() {
  using L = Layout<D, BITS, PROD>;
  const size_t work = static_cast<size_t>(kWarps) * (Fp16Tile<D>::kBytes + 2 * L::kStage);
  const size_t floats = MAXG * L::kQueryFloats + L::kKeyPairs + L::kValuePairs + L::kSignPairs + kWarps * kPtFloats;
  return {turboquant_attend_kernel<D, BITS, PROD, MAXG>,
          sizeof(float) * floats + std::max(work, epilogue_bytes<kMmaHeads>(D)),
          PROD ? "launch of turboquant_attend_kernel (prod)" : "launch of turboquant_attend_kernel"};
}

template <int D, int BITS, bool PROD>
SplitKernel for_group(const AttendParams& p) {
  if (p.group <= 4) return split_kernel<D, BITS, PROD, 4>();
  return split_kernel<D, BITS, PROD, 8>();
}

template <int D, bool PROD>
SplitKernel for_bits(const AttendParams& p, int bits) {
  if (bits == 2) return for_group<D, 2, PROD>(p);
  if (bits == 3) return for_group<D, 3, PROD>(p);
  if (bits == 4) return for_group<D, 4, PROD>(p);
  throw Error("cuda turboquant attention: bits " + std::to_string(bits) + "; expected 2, 3 or 4");
}

template <int D>
SplitKernel for_method(const AttendParams& p, int bits, bool prod) {
  return prod ? for_bits<D, true>(p, bits) : for_bits<D, false>(p, bits);
}

}  // namespace

SplitKernel turboquant_split_kernel(const AttendParams& p, int bits, bool prod) {
  return with_head_dim(p.head_dim, "cuda turboquant attention",
                       [&]<int D>() { return for_method<D>(p, bits, prod); });
}

}  // namespace veloxquant::cuda
