// Split decode attention straight from VecInfer's records (the CPU codecs' layouts), the values
// on tensor cores as TurboQuant's are (tc_decode.cuh, turboquant_values.cuh).
//  - Keys are scored by asymmetric distance computation, as the CPU codec scores them: each block
//    transforms its group's queries once, q' = R (lambda q) (lambda its KV head's smoothing
//    factors, R the key rotation), and builds a table in shared memory of q'_s . c_sj for every
//    sub-space s and centroid j, one fp16 pair of query heads per entry. A token's score is the
//    sum of its indices' entries: lane (g, t) of the C layout sums heads 2t, 2t + 1 of tokens g
//    and g + 8 of each half of the tile, one 4-byte lookup per index. Keys are never decoded.
//  - Values: turboquant_mse's records, decoded tile by tile into fp16 rows and summed with the
//    probabilities times each token's norm, in the rotated space; combine.cu rotates back.
#include <cuda_fp16.h>

#include "cuda/attention/head_dims.h"
#include "cuda/attention/tc_decode.cuh"
#include "cuda/common/check.cuh"
#include "cuda/common/rotation.cuh"
#include "cuda/fp16/fp16_tile.cuh"
#include "cuda/turboquant/turboquant_values.cuh"
#include "cuda/vecinfer/vecinfer_launch.h"
#include "cuda/vecinfer/vecinfer_rules.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

// vecinfer_attention_smem (vecinfer_rules.h) sizes this kernel's shared memory with these.
static_assert(kWarps == 4 && kPtFloats == 8 * 48 && kMmaHeads == 8);

__device__ inline float2 unpack_half2(uint32_t w) {
  __half2 h;
  memcpy(&h, &w, sizeof(h));
  return __half22float2(h);
}

template <int D, int BITS, int MAXG>
__global__ void __launch_bounds__(kThreads) vecinfer_attend_kernel(AttendParams p) {
  p = for_query(p);
  using Tile = Fp16Tile<D>;
  static_assert(Tile::kBytes == 64 * D);
  constexpr int kValueBytes = 4 + D * BITS / 8;
  constexpr int kPairs = MAXG / 2;  // fp16 pairs of query heads per table entry
  const VecinferArgs a = p.format.get<VecinferArgs>();
  const int S = a.keys.subspaces, C = a.keys.centroids, dims = D / S;
  const int stage_bytes = kTileTokens * (S + kValueBytes) + 16;
  const int lut_words = (S * C * kPairs + 3) / 4 * 4;
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const MmaLane ln(lane);
  float* q_s = reinterpret_cast<float*>(smem);                             // [MAXG][D]
  uint32_t* value_pairs = reinterpret_cast<uint32_t*>(q_s + MAXG * D);     // 2^(2 BITS)
  float* pts = reinterpret_cast<float*>(value_pairs + (1 << (2 * BITS)));  // [kWarps][kPtFloats]
  uint32_t* lut = reinterpret_cast<uint32_t*>(pts + kWarps * kPtFloats);   // [S][C][kPairs]
  uint8_t* tiles = reinterpret_cast<uint8_t*>(lut + lut_words);
  float* pt = pts + warp * kPtFloats;
  uint4* vt = reinterpret_cast<uint4*>(tiles + warp * Tile::kBytes);  // the warp's decoded value rows
  uint8_t* stages = tiles + kWarps * Tile::kBytes;
  uint8_t* buf[2] = {stages + (warp * 2) * stage_bytes, stages + (warp * 2 + 1) * stage_bytes};
  const int seq = blockIdx.y, split = blockIdx.x, kvh = seq % p.kv_heads;
  load_queries<MAXG>(p, seq, q_s);
  fill_level_pairs<BITS, kThreads>(value_pairs, a.value_codebook);
  const float* smooth = a.keys.smooth + kvh * D;
  for (int i = threadIdx.x; i < MAXG * D; i += kThreads) q_s[i] *= smooth[i % D];
  __syncthreads();
  rotate_rows<D, MAXG, kThreads>(q_s, a.keys.key_signs, a.keys.key_rotation);
  // The table: entry (s, j) holds q'_s . c_sj of heads 2k and 2k + 1 in its pair k, with the
  // Hadamard transform's 1/sqrt(D) folded in.
  constexpr bool kDense = (D & (D - 1)) != 0;
  const float f = kDense ? 1.0f : rsqrtf(static_cast<float>(D));
  const float* books = a.keys.codebooks + static_cast<size_t>(kvh) * S * C * dims;
  for (int i = threadIdx.x; i < S * C * kPairs; i += kThreads) {
    const int pair = i % kPairs, entry = i / kPairs, sub = entry / C;
    const float* centroid = books + static_cast<size_t>(entry) * dims;
    const float* q0 = q_s + 2 * pair * D + sub * dims;
    const float* q1 = q0 + D;
    float d0 = 0, d1 = 0;
    for (int k = 0; k < dims; ++k) d0 = fmaf(q0[k], centroid[k], d0), d1 = fmaf(q1[k], centroid[k], d1);
    lut[i] = pack_half2(d0 * f, d1 * f);
  }
  __syncthreads();

  const uint8_t* kseq = p.keys.codes + seq * p.keys.stream_bytes;
  const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
  const auto fetch = [&](uint8_t* dst, int tile) {
    const size_t first = p.keys.slot(tile * kTileTokens);
    warp_copy_async(dst, kseq + first * S, kTileTokens * S, lane);
    warp_copy_async(dst + kTileTokens * S, vseq + first * kValueBytes, kTileTokens * kValueBytes, lane);
  };
  TcSoftmax st;
  float acc[D / 16][4] = {};
  for_each_tile(p, split, buf, fetch, [&](uint8_t* stage, int tile) {
    const uint8_t* krec = stage;
    const uint8_t* vrec = stage + kTileTokens * S;
    decode_value_tile<D, BITS>(vrec, value_pairs, vt, lane);
    float s[2][4] = {};
    if (ln.t < kPairs) {  // lanes of heads past MAXG keep zero scores, as zero queries would give
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint8_t* r0 = krec + (16 * h + ln.g) * S;
        const uint8_t* r1 = r0 + 8 * S;
        for (int sub = 0; sub < S; ++sub) {
          const float2 x0 = unpack_half2(lut[(sub * C + r0[sub]) * kPairs + ln.t]);
          const float2 x1 = unpack_half2(lut[(sub * C + r1[sub]) * kPairs + ln.t]);
          s[h][0] += x0.x, s[h][1] += x0.y, s[h][2] += x1.x, s[h][3] += x1.y;
        }
      }
    }
    attend_tile_values<D>(s, vt, 1.0f, tile * kTileTokens, score_mask(p, p.main_end), st, acc, pt, ln, vrec,
                          kValueBytes);
  });
  async_wait<0>();
  __syncthreads();
  write_tc_partial<D>(p, st, acc, fp16_tile_channel, tiles, seq, split);
}

template <int D, int BITS, int MAXG>
SplitKernel split_kernel(const VecinferArgs& a) {
  return {vecinfer_attend_kernel<D, BITS, MAXG>,
          vecinfer_attention_smem(D, BITS, static_cast<size_t>(a.keys.subspaces),
                                  static_cast<size_t>(a.keys.centroids), MAXG),
          "launch of vecinfer_attend_kernel"};
}

template <int D, int BITS>
SplitKernel for_group(const AttendParams& p) {
  const VecinferArgs a = p.format.get<VecinferArgs>();
  if (p.group <= 4) return split_kernel<D, BITS, 4>(a);
  return split_kernel<D, BITS, 8>(a);
}

template <int D>
SplitKernel for_bits(const AttendParams& p, int bits) {
  if (bits == 2) return for_group<D, 2>(p);
  if (bits == 3) return for_group<D, 3>(p);
  if (bits == 4) return for_group<D, 4>(p);
  throw Error("cuda vecinfer attention: vbits " + std::to_string(bits) + "; expected 2, 3 or 4");
}

}  // namespace

SplitKernel vecinfer_split_kernel(const AttendParams& p, int bits) {
  return with_head_dim(p.head_dim, "cuda vecinfer attention", [&]<int D>() { return for_bits<D>(p, bits); });
}

}  // namespace veloxquant::cuda
