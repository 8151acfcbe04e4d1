// Split decode attention straight from TurboQuant-MSE records ([f32 norm][dim codes of b bits],
// the CPU codec's layout; split_decode.cuh has the common structure).
//  - The queries are rotated once per block (signs, then the orthonormal Hadamard transform):
//    q . x_t = ||x_t|| (R q) . codebook[codes_t], so a key score is codebook lookups times the
//    rotated query, lane = token, reading its record's words from shared memory (record strides
//    are odd word counts, so the lanes hit distinct banks).
//  - Values are summed in the rotated space (each lane owns dim / 32 rotated channels), weighted
//    by p * ||v_t||; combine.cu rotates the merged sum back once per query head.
#include <cuda_fp16.h>

#include "cuda/attention/launchers.h"
#include "cuda/attention/split_decode.cuh"
#include "cuda/common/check.cuh"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

template <int D, int BITS>
struct Record {
  static constexpr int kBytes = 4 + D * BITS / 8;
  static constexpr int kStage = 2 * kTileTokens * kBytes;  // keys, then values
  static constexpr unsigned kMask = (1u << BITS) - 1u;
  // Code i (0 <= i < 32) of a run of 32 codes held in BITS consecutive words.
  template <int I>
  __device__ static unsigned code(const uint32_t (&w)[BITS]) {
    constexpr int bit = I * BITS, word = bit / 32, shift = bit % 32;
    if constexpr (shift + BITS <= 32) return (w[word] >> shift) & kMask;
    else return __funnelshift_r(w[word], w[word + 1], shift) & kMask;
  }
};

// Unrolled over the 32 codes of a run (compile-time shifts, registers only).
template <int D, int BITS, int MAXG, int I = 0>
__device__ void score_run(const uint32_t (&w)[BITS], const float* qr, const float* cb, int base,
                          float (&s)[MAXG]) {
  if constexpr (I < 32) {
    float level[4];
    level[0] = cb[Record<D, BITS>::template code<I>(w)];
    level[1] = cb[Record<D, BITS>::template code<I + 1>(w)];
    level[2] = cb[Record<D, BITS>::template code<I + 2>(w)];
    level[3] = cb[Record<D, BITS>::template code<I + 3>(w)];
#pragma unroll
    for (int h = 0; h < MAXG; ++h) {
      const float4 q = *reinterpret_cast<const float4*>(qr + h * D + base + I);
      s[h] += q.x * level[0] + q.y * level[1] + q.z * level[2] + q.w * level[3];
    }
    score_run<D, BITS, MAXG, I + 4>(w, qr, cb, base, s);
  }
}

template <int D, int BITS, int MAXG>
__global__ void __launch_bounds__(kThreads) turboquant_attend_kernel(AttendParams p) {
  using R = Record<D, BITS>;
  constexpr int NJ = D / kWarp;  // rotated value channels per lane
  constexpr int kLevels = 1 << BITS;
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  float* q_s = reinterpret_cast<float*>(smem);
  float* kcb = q_s + MAXG * D;
  float* vcb = kcb + kLevels;
  float* p_s = vcb + kLevels + warp * kTileTokens * MAXG;
  uint8_t* stages = smem + sizeof(float) * (MAXG * D + 2 * kLevels + kWarps * kTileTokens * MAXG);
  uint8_t* buf[2] = {stages + (warp * 2) * R::kStage, stages + (warp * 2 + 1) * R::kStage};
  const int seq = blockIdx.y, split = blockIdx.x;
  load_queries<MAXG>(p, seq, q_s);
  if (threadIdx.x < kLevels) kcb[threadIdx.x] = p.key_codebook[threadIdx.x], vcb[threadIdx.x] = p.value_codebook[threadIdx.x];
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
  for (int i = threadIdx.x; i < MAXG * D; i += kThreads) q_s[i] *= rsqrtf(static_cast<float>(D));
  __syncthreads();

  const uint8_t* kseq = p.keys.codes + seq * p.keys.stream_bytes;
  const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
  const auto fetch = [&](uint8_t* dst, int tile) {
    const size_t at = static_cast<size_t>(tile) * kTileTokens * R::kBytes;
    warp_copy_async(dst, kseq + at, kTileTokens * R::kBytes, lane);
    warp_copy_async(dst + kTileTokens * R::kBytes, vseq + at, kTileTokens * R::kBytes, lane);
  };
  SoftmaxState<MAXG> st;
  float acc[MAXG][NJ] = {};
  for_each_tile(p, split, buf, fetch, [&](auto stage, int tile) {
    const uint8_t* krec = stage + lane * R::kBytes;
    const uint8_t* vrecs = stage + kTileTokens * R::kBytes;
    const uint32_t* kw = reinterpret_cast<const uint32_t*>(krec + 4);
    float s[MAXG] = {};
#pragma unroll
    for (int run = 0; run < D / 32; ++run) {
      uint32_t w[BITS];
#pragma unroll
      for (int i = 0; i < BITS; ++i) w[i] = kw[run * BITS + i];
      score_run<D, BITS, MAXG>(w, q_s, kcb, run * 32, s);
    }
    const float knorm = *reinterpret_cast<const float*>(krec);
    const bool valid = tile * kTileTokens + lane < p.main_end;
#pragma unroll
    for (int h = 0; h < MAXG; ++h) s[h] = valid ? s[h] * knorm : -INFINITY;
    const float vnorm = *reinterpret_cast<const float*>(vrecs + lane * R::kBytes);
    st.fold(s, acc, p_s, lane, p.group, vnorm);
    __syncwarp();
    // Lane's rotated channels lane * NJ .. + NJ: NJ * BITS bits from bit lane * NJ * BITS.
    const int bit = lane * NJ * BITS, word = bit / 32, shift = bit % 32;
    const bool spans = shift + NJ * BITS > 32;
    for (int t = 0; t < kTileTokens; ++t) {
      const uint32_t* vw = reinterpret_cast<const uint32_t*>(vrecs + t * R::kBytes + 4);
      const uint32_t lo = vw[word], hi = spans ? vw[word + 1] : 0u;
      const uint32_t bits = __funnelshift_r(lo, hi, shift);
      float level[NJ];
#pragma unroll
      for (int j = 0; j < NJ; ++j) level[j] = vcb[(bits >> (j * BITS)) & R::kMask];
#pragma unroll
      for (int h = 0; h < MAXG; ++h) {
        const float w = p_s[t * MAXG + h];
#pragma unroll
        for (int j = 0; j < NJ; ++j) acc[h][j] += w * level[j];
      }
    }
    __syncwarp();
});
  async_wait<0>();
  __syncthreads();
  store_and_write_partial<D>(p, st, acc, stages, seq, split);
}

template <int D, int BITS, int MAXG>
SplitKernel split_kernel() {
  using R = Record<D, BITS>;
  const size_t stages = static_cast<size_t>(kWarps) * 2 * R::kStage;
  return {turboquant_attend_kernel<D, BITS, MAXG>,
          sizeof(float) * (MAXG * D + 2 * (1 << BITS) + kWarps * kTileTokens * MAXG) +
              std::max(stages, epilogue_bytes<MAXG>(D)),
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
