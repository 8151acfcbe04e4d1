// Split decode attention straight from KIVI codes (split_decode.cuh has the common structure).
//  - Keys, per 32-token tile (inside one key group): the query is folded with the group's channel
//    scales once (qf = q * scale, offset = q . min), then lane = token reads its 32-bit words of
//    the lane tile from shared memory and sums qf[c] * code over the channels: no dequantized key
//    is ever formed, and the lane-per-token layout makes the reads conflict-free.
//  - Values, per 4-token quad: each lane owns a fixed set of channels (the word it reads in every
//    quad) and accumulates p * (min + scale * code) for every head of the group.
//  - The ring of fp16 rows (the residual window, and keys of a partial group) is the last split:
//    at most residual + group tokens.
#include <cuda_fp16.h>

#include "cuda/attention/launchers.h"
#include "cuda/attention/split_decode.cuh"
#include "cuda/common/check.cuh"
#include "cuda/kivi/kivi_layout.cuh"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

template <int D, int BITS>
struct KiviTile {
  static constexpr int kCpb = 8 / BITS;
  static constexpr int kKeyRows = D / (4 * kCpb);          // word rows of a key lane tile
  static constexpr int kTileBytes = 16 * D * BITS / 8;     // one 16-token key lane tile
  static constexpr int kKeyBytes = 4 * D + 2 * kTileBytes + 64;  // params, tile, pad, tile
  static constexpr int kWords = D * BITS / 8;              // 32-bit words of a value quad
  static constexpr int kQuadWordsPerLane = kWords / 4;     // over the tile's 8 quads
  static constexpr int kSlots = (kWords > 32 ? kWords / 32 : 1) * kCpb;  // channels per lane
  __host__ __device__ static constexpr int stage_bytes(int value_block) { return kKeyBytes + 8 * value_block; }
};

template <int D, int BITS, int MAXG>
__global__ void __launch_bounds__(kThreads) kivi_attend_kernel(AttendParams p) {
  using T = KiviTile<D, BITS>;
  constexpr unsigned kMask = (1u << BITS) - 1u;
  const kivi::KeyLayout kl{D, BITS, p.kivi_group};
  const kivi::ValueLayout vl{D, BITS, min(p.kivi_group, D)};
  const int vblock = vl.block_bytes(), stage_bytes = T::stage_bytes(vblock);
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  float* q_s = reinterpret_cast<float*>(smem);
  float* qf = q_s + MAXG * D + warp * MAXG * D;                        // folded queries
  float* p_s = q_s + (1 + kWarps) * MAXG * D + warp * kTileTokens * MAXG;  // [token][head]
  uint8_t* stages = smem + sizeof(float) * ((1 + kWarps) * MAXG * D + kWarps * kTileTokens * MAXG);
  uint8_t* buf[2] = {stages + (warp * 2) * stage_bytes, stages + (warp * 2 + 1) * stage_bytes};
  const int seq = blockIdx.y, split = blockIdx.x;
  load_queries<MAXG>(p, seq, q_s);
  __syncthreads();

  const uint8_t* kseq = p.keys.codes + seq * p.keys.stream_bytes;
  const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
  const auto fetch = [&](uint8_t* dst, int tile) {
    const int t0 = tile * kTileTokens;
    const uint8_t* kb = kseq + static_cast<size_t>(t0 / kl.group) * kl.block_bytes();
    warp_copy_async(dst, kb, 4 * D, lane);
    const uint8_t* tiles = kb + 4 * D + (t0 % kl.group) / 16 * T::kTileBytes;
    warp_copy_async(dst + 4 * D, tiles, T::kTileBytes, lane);
    warp_copy_async(dst + 4 * D + T::kTileBytes + 64, tiles + T::kTileBytes, T::kTileBytes, lane);
    warp_copy_async(dst + T::kKeyBytes, vseq + static_cast<size_t>(t0 / 4) * vblock, 8 * vblock, lane);
  };

  SoftmaxState<MAXG> st;
  float acc[MAXG][T::kSlots] = {};
  float* o = reinterpret_cast<float*>(stages);  // the epilogue reuses the stages
  float* ml = o + kWarps * MAXG * D;
  if (split < p.main_splits) {
    for_each_tile(p, split, buf, fetch, [&](auto stage, int tile) {
      // Fold the group's scales into the queries; the minimums give one offset per head.
      const __half* scale = reinterpret_cast<const __half*>(stage);
      float off[MAXG] = {};
      for (int c = lane; c < D; c += kWarp) {
        const float sc = __half2float(scale[c]), mn = __half2float(scale[D + c]);
#pragma unroll
        for (int h = 0; h < MAXG; ++h) qf[h * D + c] = q_s[h * D + c] * sc, off[h] += q_s[h * D + c] * mn;
      }
#pragma unroll
      for (int h = 0; h < MAXG; ++h) off[h] = warp_sum(off[h]);
      __syncwarp();
      const uint32_t* words = reinterpret_cast<const uint32_t*>(stage + 4 * D + (lane / 16) * (T::kTileBytes + 64));
      float s[MAXG];
#pragma unroll
      for (int h = 0; h < MAXG; ++h) s[h] = off[h];
#pragma unroll 2
      for (int r = 0; r < T::kKeyRows; ++r) {
        const uint32_t word = words[r * 16 + lane % 16];
#pragma unroll
        for (int kk = 0; kk < T::kCpb; ++kk) {
          float code[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) code[i] = small_code_to_float((word >> (8 * i + BITS * kk)) & kMask);
          const int c = r * 4 * T::kCpb + 4 * kk;
#pragma unroll
          for (int h = 0; h < MAXG; ++h) {
            const float4 f = *reinterpret_cast<const float4*>(qf + h * D + c);
            s[h] += f.x * code[0] + f.y * code[1] + f.z * code[2] + f.w * code[3];
          }
        }
      }
      st.fold(s, acc, p_s, lane, p.group);
      __syncwarp();
      const uint8_t* quads = stage + T::kKeyBytes;
#pragma unroll
      for (int j = 0; j < T::kQuadWordsPerLane; ++j) {
        const int idx = lane + kWarp * j, quad = idx / T::kWords, w = idx % T::kWords;
        const uint8_t* block = quads + quad * vblock;
        const uint32_t word = reinterpret_cast<const uint32_t*>(block)[w];
        const __half* params = reinterpret_cast<const __half*>(block + vl.quad_bytes());
        const int slot0 = (w / kWarp) * T::kCpb;
#pragma unroll
        for (int kk = 0; kk < T::kCpb; ++kk) {
          const int c = (w / 16) * 16 * T::kCpb + 16 * kk + w % 16, g = c / vl.group;
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const float v = __half2float(params[4 * vl.groups() + g * 4 + i]) +
                            __half2float(params[g * 4 + i]) *
                                small_code_to_float((word >> (8 * i + BITS * kk)) & kMask);
            const float* pw = p_s + (quad * 4 + i) * MAXG;
#pragma unroll
            for (int h = 0; h < MAXG; ++h) acc[h][slot0 + kk] += pw[h] * v;
          }
        }
      }
      __syncwarp();
  });
    async_wait<0>();
    __syncthreads();
    // Lanes that read the same word in different quads hold partial sums of the same channels.
    if constexpr (T::kWords < kWarp) {
#pragma unroll
      for (int h = 0; h < MAXG; ++h)
#pragma unroll
        for (int j = 0; j < T::kSlots; ++j) acc[h][j] += __shfl_xor_sync(0xffffffffu, acc[h][j], 16);
    }
    if (lane < T::kWords) {
#pragma unroll
      for (int ws = 0; ws < T::kSlots / T::kCpb; ++ws) {
        const int w = lane + kWarp * ws;
#pragma unroll
        for (int kk = 0; kk < T::kCpb; ++kk) {
          const int c = (w / 16) * 16 * T::kCpb + 16 * kk + w % 16;
#pragma unroll
          for (int h = 0; h < MAXG; ++h) o[(warp * MAXG + h) * D + c] = acc[h][ws * T::kCpb + kk];
        }
      }
    }
  } else {
    // The ring split: keys of [key_encoded, tokens) and values of [value_encoded, tokens) are fp16
    // rows; values of [key_encoded, value_encoded) still come from codes. Warps take 32-token
    // chunks in turn; lanes run over channels, so every row is read coalesced.
    __syncthreads();
    float tail_acc[MAXG][D / kWarp] = {};
    const __half* kring = reinterpret_cast<const __half*>(p.keys.ring) + static_cast<size_t>(seq) * p.keys.ring_tokens * D;
    const __half* vring = reinterpret_cast<const __half*>(p.values.ring) + static_cast<size_t>(seq) * p.values.ring_tokens * D;
    for (int t0 = p.key_encoded + warp * kTileTokens; t0 < p.tokens; t0 += kWarps * kTileTokens) {
      float s[MAXG];
#pragma unroll
      for (int h = 0; h < MAXG; ++h) s[h] = -INFINITY;
      for (int i = 0; i < kTileTokens && t0 + i < p.tokens; ++i) {
        const __half* row = kring + static_cast<size_t>((t0 + i) % p.keys.ring_tokens) * D;
        float part[MAXG] = {};
#pragma unroll
        for (int j = 0; j < D / kWarp; ++j) {
          const float x = __half2float(row[lane + kWarp * j]);
#pragma unroll
          for (int h = 0; h < MAXG; ++h) part[h] += q_s[h * D + lane + kWarp * j] * x;
        }
#pragma unroll
        for (int h = 0; h < MAXG; ++h) {
          const float total = warp_sum(part[h]);
          if (lane == i) s[h] = total;
        }
      }
      st.fold(s, tail_acc, p_s, lane, p.group);
      __syncwarp();
      for (int i = 0; i < kTileTokens && t0 + i < p.tokens; ++i) {
        const int tok = t0 + i;
#pragma unroll
        for (int j = 0; j < D / kWarp; ++j) {
          const int c = lane + kWarp * j;
          const float v = tok < p.value_encoded
                              ? vl.decode(vseq, tok, c)
                              : __half2float(vring[static_cast<size_t>(tok % p.values.ring_tokens) * D + c]);
#pragma unroll
          for (int h = 0; h < MAXG; ++h) tail_acc[h][j] += p_s[i * MAXG + h] * v;
        }
      }
      __syncwarp();
    }
#pragma unroll
    for (int h = 0; h < MAXG; ++h)
#pragma unroll
      for (int j = 0; j < D / kWarp; ++j) o[(warp * MAXG + h) * D + lane + kWarp * j] = tail_acc[h][j];
  }
  write_partial<MAXG>(p, st, o, ml, seq, split);
}

template <int D, int BITS, int MAXG>
void launch(const AttendParams& p, int batch, cudaStream_t stream) {
  using T = KiviTile<D, BITS>;
  const kivi::ValueLayout vl{D, BITS, std::min(p.kivi_group, D)};
  const size_t stages = static_cast<size_t>(kWarps) * 2 * T::stage_bytes(vl.block_bytes());
  const size_t bytes = sizeof(float) * ((1 + kWarps) * MAXG * D + kWarps * kTileTokens * MAXG) +
                       std::max(stages, epilogue_bytes<MAXG>(D));
  launch_split_kernel(kivi_attend_kernel<D, BITS, MAXG>, "launch of kivi_attend_kernel", bytes, p,
                      batch, stream);
}

template <int D, int BITS>
void launch_group(const AttendParams& p, int batch, cudaStream_t stream) {
  if (p.group <= 4) return launch<D, BITS, 4>(p, batch, stream);
  return launch<D, BITS, 8>(p, batch, stream);
}

}  // namespace

void launch_kivi_attend(const AttendParams& p, int batch, int bits, cudaStream_t stream) {
  if (p.head_dim == 128 && bits == 2) return launch_group<128, 2>(p, batch, stream);
  if (p.head_dim == 128 && bits == 4) return launch_group<128, 4>(p, batch, stream);
  if (p.head_dim == 64 && bits == 2) return launch_group<64, 2>(p, batch, stream);
  if (p.head_dim == 64 && bits == 4) return launch_group<64, 4>(p, batch, stream);
  throw Error("cuda kivi attention: head_dim " + std::to_string(p.head_dim) + " with " +
              std::to_string(bits) + " bits; expected head_dim 64 or 128 and bits 2 or 4");
}

}  // namespace veloxquant::cuda
