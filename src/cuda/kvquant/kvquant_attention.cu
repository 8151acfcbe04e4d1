// Split decode attention over KVQuant's records. Neither side can be summed on its codes (levels
// that are not a grid, keys stored before RoPE: docs/methods/kvquant_nuq.md), so each warp decodes
// its 32-token tile into fp16 rows in shared memory, one lane per token, keys first, then the
// values over them, and attends on tensor cores as the fp16 cache's kernel does (fp16_tile.cuh).
// Only the records cross from global memory, by cp.async, two tiles in flight where shared memory
// allows.
#include <cuda_fp16.h>

#include "cuda/attention/head_dims.h"
#include "cuda/attention/tc_decode.cuh"
#include "cuda/common/check.cuh"
#include "cuda/fp16/fp16_tile.cuh"
#include "cuda/kvquant/kvquant_launch.h"
#include "cuda/kvquant/kvquant_rules.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

constexpr int kMaxLevels = 256;
constexpr uint16_t kSinkSlot = 0xFFFF;

// The block's KV head's tables in shared memory.
struct Tables {
  const float *key_mid, *key_half, *key_levels, *value_levels;
  const double* inv_freq;
  const __half *key_sink, *value_sink;  // the stream's first token (its state), when kept
};

__device__ inline uint16_t u16_at(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }

// Code c of an LSB-first stream of `bits`-bit codes (core/bitpack.h's order). The second byte may
// lie past the codes, in the record's slots or the stage's padding.
__device__ inline unsigned code_at(const uint8_t* packed, int c, int bits) {
  const int bit = c * bits;
  const unsigned w = packed[bit >> 3] | static_cast<unsigned>(packed[(bit >> 3) + 1]) << 8;
  return w >> (bit & 7) & ((1u << bits) - 1u);
}

// (x0, x1) turned to position pos. The angle is the CPU's, in double, brought into [-pi, pi]
// before a float sine and cosine: their error (about 4e-7) is far below the fp16 rounding that
// the decoded row gets next.
__device__ inline void rotate_to(float& x0, float& x1, double inv_freq, int pos) {
  constexpr double kTwoPi = 6.283185307179586, kTurnsPerRadian = 0.15915494309189535;
  double angle = __dmul_rn(static_cast<double>(pos), inv_freq);
  angle -= kTwoPi * rint(angle * kTurnsPerRadian);
  float s, c;
  __sincosf(static_cast<float>(angle), &s, &c);
  const float y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
  x0 = y0, x1 = y1;
}

// A record decoded into row `row` of an fp16 tile, as the CPU codec's decode() computes it: each
// level through its channel's range (keys) or the token's (values), the sparse entries written
// over, a token marked as the stream's first read from its row. Keys are then turned to `pos`.
template <int D>
__device__ void decode_record(const uint8_t* rec, const KvquantSide& a, bool key, const Tables& t,
                              int rope_half, int pos, uint4* tile, int row) {
  const int slots_at = a.slots_offset(D);
  const bool first = a.slots > 0 && u16_at(rec + slots_at) == kSinkSlot;
  const __half* sink = key ? t.key_sink : t.value_sink;
  const float* levels = key ? t.key_levels : t.value_levels;
  float mid = 0, half = 0;
  if (!key) {
    const float lo = __half2float(__ushort_as_half(u16_at(rec))),
                hi = __half2float(__ushort_as_half(u16_at(rec + 2)));
    mid = __fmul_rn(__fadd_rn(lo, hi), 0.5f), half = __fmul_rn(__fsub_rn(hi, lo), 0.5f);
  }
  const uint8_t* packed = rec + a.codes_offset;
  int slot = 0, next = !first && a.outliers > 0 ? u16_at(rec + slots_at) : D;
#pragma unroll 2
  for (int k = 0; k < D / 8; ++k) {
    float v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int c = 8 * k + j;
      if (first) {
        v[j] = __half2float(sink[c]);
        continue;
      }
      const float level = levels[code_at(packed, c, a.bits)];
      v[j] = key ? __fadd_rn(t.key_mid[c], __fmul_rn(t.key_half[c], level))
                 : __fadd_rn(mid, __fmul_rn(half, level));
      if (c == next) {
        v[j] = __half2float(__ushort_as_half(u16_at(rec + slots_at + 4 * slot + 2)));
        next = ++slot < a.outliers ? u16_at(rec + slots_at + 4 * slot) : D;
      }
    }
#pragma unroll
    for (int j = 0; j < 8; j += 2)
      if (4 * k + j / 2 < rope_half) rotate_to(v[j], v[j + 1], t.inv_freq[4 * k + j / 2], pos);
    tile[Fp16Tile<D>::slot(row, k)] = make_uint4(pack_half2(v[0], v[1]), pack_half2(v[2], v[3]),
                                                 pack_half2(v[4], v[5]), pack_half2(v[6], v[7]));
  }
}

template <int D, int S>
__global__ void __launch_bounds__(kThreads) kvquant_attend_kernel(AttendParams p) {
  p = for_query(p);
  using Tile = Fp16Tile<D>;
  const KvquantArgs a = p.format.get<KvquantArgs>();
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const MmaLane ln(lane);
  const int seq = blockIdx.y, split = blockIdx.x, kvh = seq % p.kv_heads;
  // Laid out as kvquant_attention_smem (kvquant_rules.h) counts it.
  float* pts = reinterpret_cast<float*>(smem);  // [kWarps][kPtFloats]
  float* key_mid = pts + kWarps * kPtFloats;
  float* key_half = key_mid + D;
  float* key_levels = key_half + D;
  float* value_levels = key_levels + kMaxLevels;
  double* inv_freq = reinterpret_cast<double*>(value_levels + kMaxLevels);  // [D / 2]
  __half* key_sink = reinterpret_cast<__half*>(inv_freq + D / 2);
  __half* value_sink = key_sink + D;
  constexpr int kTableBytes = 4 * (kWarps * kPtFloats + 2 * D + 2 * kMaxLevels) + 8 * (D / 2) + 4 * D;
  uint8_t* tiles = smem + (kTableBytes + 15) / 16 * 16;

  for (int i = threadIdx.x; i < D; i += kThreads) {
    const float lo = a.keys.lo[kvh * D + i], hi = a.keys.hi[kvh * D + i];
    key_mid[i] = __fmul_rn(__fadd_rn(lo, hi), 0.5f), key_half[i] = __fmul_rn(__fsub_rn(hi, lo), 0.5f);
    if (p.keys.state != nullptr) {
      key_sink[i] = reinterpret_cast<const __half*>(p.keys.state + seq * p.keys.state_bytes)[i];
      value_sink[i] = reinterpret_cast<const __half*>(p.values.state + seq * p.values.state_bytes)[i];
    }
  }
  const int levels = 1 << a.keys.bits;
  for (int i = threadIdx.x; i < levels; i += kThreads) {
    key_levels[i] = a.keys.levels[kvh * levels + i];
    value_levels[i] = a.values.levels[kvh * levels + i];
  }
  for (int i = threadIdx.x; i < a.rope_half; i += kThreads) inv_freq[i] = a.inv_freq[i];
  uint32_t bq[D / 16][2];
  load_query_fragments<D>(p, seq, ln, bq);
  __syncthreads();
  const Tables t{key_mid, key_half, key_levels, value_levels, inv_freq, key_sink, value_sink};

  const int rk = a.keys.record(D), rv = a.values.record(D);
  const int stage_bytes = kTileTokens * (rk + rv) + 16;
  uint8_t* mine = tiles + warp * (Tile::kBytes + S * stage_bytes);
  uint4* rows = reinterpret_cast<uint4*>(mine);
  uint8_t* buf[S];
  for (int i = 0; i < S; ++i) buf[i] = mine + Tile::kBytes + i * stage_bytes;
  const uint8_t* kseq = p.keys.codes + seq * p.keys.stream_bytes;
  const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
  // A tile's records are 32 whole records from a multiple of 32 tokens: 16-byte aligned, a
  // multiple of 16 bytes (records are a whole number of 16-bit units).
  const auto fetch = [&](uint8_t* dst, int tile) {
    const size_t first = p.keys.slot(tile * kTileTokens);
    warp_copy_async(dst, kseq + first * rk, kTileTokens * rk, lane);
    warp_copy_async(dst + kTileTokens * rk, vseq + first * rv, kTileTokens * rv, lane);
  };
  TcSoftmax st;
  float acc[D / 16][4] = {};
  // One fp16 tile per warp, keys then values: the scores are taken before the values overwrite it,
  // so that a block's shared memory leaves room for more resident blocks.
  for_each_tile(p, split, buf, fetch, [&](uint8_t* stage, int tile) {
    const int token = tile * kTileTokens + lane;
    decode_record<D>(stage + lane * rk, a.keys, true, t, a.rope_half, token, rows, lane);
    __syncwarp();
    float s[2][4] = {};
    fp16_tile_scores<D>(rows, bq, s, ln);
    __syncwarp();
    decode_record<D>(stage + kTileTokens * rk + lane * rv, a.values, false, t, 0, token, rows, lane);
    __syncwarp();
    attend_tile_values<D>(s, rows, p.scale, tile * kTileTokens, score_mask(p, p.main_end), st, acc,
                          pts + warp * kPtFloats, ln);
  });
  async_wait<0>();
  __syncthreads();
  write_tc_partial<D>(p, st, acc, fp16_tile_channel, tiles, seq, split);
}

template <int D, int S>
SplitKernel split_kernel(const KvquantArgs& a) {
  return {kvquant_attend_kernel<D, S>,
          kvquant_attention_smem(D, static_cast<size_t>(a.keys.record(D)),
                                 static_cast<size_t>(a.values.record(D)), S),
          "launch of kvquant_attend_kernel"};
}

template <int D>
SplitKernel for_stages(const KvquantArgs& a) {
  return a.stages == 2 ? split_kernel<D, 2>(a) : split_kernel<D, 1>(a);
}

}  // namespace

SplitKernel kvquant_split_kernel(const AttendParams& p) {
  const KvquantArgs a = p.format.get<KvquantArgs>();
  return with_head_dim(p.head_dim, "cuda kvquant_nuq attention", [&]<int D>() { return for_stages<D>(a); });
}

}  // namespace veloxquant::cuda
