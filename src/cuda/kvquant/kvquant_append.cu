// KVQuant's quantize-on-append: one warp per (stream, token, keys or values), writing the CPU
// codec's record byte for byte (codecs/kvquant/kvquant_codec.cpp). The arithmetic is the codec's,
// spelled with _rn intrinsics so that nvcc fuses nothing the CPU build does not; selections and
// ranges break ties by the lowest channel, as the codec's ordered scans do.
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>

#include "cuda/attention/head_dims.h"
#include "cuda/common/check.cuh"
#include "cuda/common/device_math.cuh"
#include "cuda/kvquant/kvquant_launch.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

constexpr int kAppendWarps = 4, kAppendThreads = kAppendWarps * kWarp;
constexpr uint16_t kSinkSlot = 0xFFFF, kEmptySlot = 0xFFFE;

// The winner of (score, channel) over the warp: the highest score, then the lowest channel.
__device__ inline void warp_argmax(float& score, int& channel) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float s = __shfl_xor_sync(0xffffffffu, score, o);
    const int c = __shfl_xor_sync(0xffffffffu, channel, o);
    if (s > score || (s == score && c < channel)) score = s, channel = c;
  }
}

// The nearest level of u (ties to the lower), as core/nuq_levels.cpp's nearest_level scans.
__device__ inline unsigned nearest_level(const float* levels, int count, float u) {
  int j = 0;
  while (j + 1 < count && u > __fmul_rn(__fadd_rn(levels[j], levels[j + 1]), 0.5f)) ++j;
  return static_cast<unsigned>(j);
}

// u = (x - mid) / half clamped to [-1, 1], 0 for an empty range (the codec's normalized()).
__device__ inline float normalized(float x, float mid, float half) {
  return half > 0 ? fminf(fmaxf(__fdiv_rn(__fsub_rn(x, mid), half), -1.0f), 1.0f) : 0.0f;
}

__device__ inline void put_u16(uint8_t* at, uint16_t v) { *reinterpret_cast<uint16_t*>(at) = v; }

// Dynamic shared memory per warp: the record being built, then the token's codes (one byte each).
template <int D>
__global__ void __launch_bounds__(kAppendThreads)
    kvquant_append_kernel(AppendParams p, KvquantSide keys, KvquantSide values, int record_room) {
  constexpr int NC = (D + kWarp - 1) / kWarp;  // channels per lane: lane + 32 i
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int t = blockIdx.x * kAppendWarps + warp;
  if (t >= p.n) return;
  const bool key = blockIdx.z == 0;
  const KvquantSide a = key ? keys : values;
  const StreamView& s = key ? p.keys : p.values;
  const int seq = blockIdx.y, kvh = seq % p.kv_heads, record = a.record(D), slots_at = a.slots_offset(D);
  uint8_t* rec = smem + warp * (record_room + D);
  uint8_t* codes = rec + record_room;
  const uint16_t* rows = key ? p.k : p.v;
  const uint16_t* row = rows + (static_cast<size_t>(seq) * p.n + t) * D;
  uint8_t* out = s.codes + seq * s.stream_bytes + static_cast<size_t>(s.slot(p.old_tokens + t)) * record;

  uint16_t h[NC];
  float x[NC];
#pragma unroll
  for (int i = 0; i < NC; ++i) {
    const int c = lane + kWarp * i;
    h[i] = c < D ? row[c] : 0;
    x[i] = __half2float(__ushort_as_half(h[i]));
  }
  for (int o = lane; o < record; o += kWarp) rec[o] = 0;
  __syncwarp();

  bool is_sink = false;
  if (a.slots > 0 && s.state != nullptr) {
    // The stream's first token: this append's first row on the first append, else the state.
    uint16_t* state = reinterpret_cast<uint16_t*>(s.state + seq * s.state_bytes);
    const uint16_t* first = p.old_tokens == 0 ? rows + static_cast<size_t>(seq) * p.n * D : state;
    bool same = true;
#pragma unroll
    for (int i = 0; i < NC; ++i) {
      const int c = lane + kWarp * i;
      if (c < D) same = same && h[i] == first[c];
      if (c < D && p.old_tokens == 0 && t == 0) state[c] = h[i];
    }
    is_sink = __all_sync(0xffffffffu, same);
  }
  if (is_sink) {  // every byte 0 but the slots: the sink mark, then unused marks
    for (int k = lane; k < a.slots; k += kWarp)
      put_u16(rec + slots_at + 4 * k, k == 0 ? kSinkSlot : kEmptySlot);
  } else {
    // Key channel ranges (mid, half) as the codec's range_of() rounds them.
    float mid[NC] = {}, half[NC] = {};
    if (key) {
#pragma unroll
      for (int i = 0; i < NC; ++i) {
        const int c = lane + kWarp * i;
        if (c >= D) continue;
        const float lo = a.lo[kvh * D + c], hi = a.hi[kvh * D + c];
        mid[i] = __fmul_rn(__fadd_rn(lo, hi), 0.5f), half[i] = __fmul_rn(__fsub_rn(hi, lo), 0.5f);
      }
    }
    // The sparse part: the `outliers` largest scores, one warp-wide pick at a time.
    unsigned chosen = 0;  // bit i: channel lane + 32 i
    for (int r = 0; r < a.outliers; ++r) {
      float best = -1.0f;
      int best_c = INT_MAX;
#pragma unroll
      for (int i = 0; i < NC; ++i) {
        const int c = lane + kWarp * i;
        if (c >= D || (chosen >> i & 1u)) continue;
        const float score = key ? fabsf(__fdiv_rn(__fsub_rn(x[i], mid[i]), half[i])) : fabsf(x[i]);
        if (score > best) best = score, best_c = c;  // channels ascend within a lane
      }
      warp_argmax(best, best_c);
      if (best_c % kWarp == lane) chosen |= 1u << (best_c / kWarp);
    }
    // Values: the token's range without its outliers, rounded to fp16 as decode() reads it.
    float rmid = 0, rhalf = 0;
    if (!key) {
      float lo = INFINITY, hi = -INFINITY;
      int lo_c = INT_MAX, hi_c = INT_MAX;
#pragma unroll
      for (int i = 0; i < NC; ++i) {
        const int c = lane + kWarp * i;
        if (c >= D || (chosen >> i & 1u)) continue;
        if (x[i] < lo) lo = x[i], lo_c = c;
        if (x[i] > hi) hi = x[i], hi_c = c;
      }
      float neg = -lo;
      warp_argmax(neg, lo_c);
      warp_argmax(hi, hi_c);
      const __half lo16 = __float2half_rn(-neg), hi16 = __float2half_rn(hi);
      if (lane == 0) put_u16(rec, __half_as_ushort(lo16)), put_u16(rec + 2, __half_as_ushort(hi16));
      const float l = __half2float(lo16), u = __half2float(hi16);
      rmid = __fmul_rn(__fadd_rn(l, u), 0.5f), rhalf = __fmul_rn(__fsub_rn(u, l), 0.5f);
    }
    const int count = 1 << a.bits;
    const float* levels = a.levels + kvh * count;
    int below = 0;  // chosen channels in earlier rounds of i: the slots before this lane's
#pragma unroll
    for (int i = 0; i < NC; ++i) {
      const int c = lane + kWarp * i;
      const bool out_i = chosen >> i & 1u;
      if (c < D) {
        codes[c] = out_i ? 0
                         : nearest_level(levels, count,
                                         key ? normalized(x[i], mid[i], half[i])
                                             : normalized(x[i], rmid, rhalf));
      }
      const unsigned ballot = __ballot_sync(0xffffffffu, out_i);
      if (out_i) {
        uint8_t* slot = rec + slots_at + 4 * (below + __popc(ballot & ((1u << lane) - 1u)));
        put_u16(slot, static_cast<uint16_t>(c));
        put_u16(slot + 2, h[i]);
      }
      below += __popc(ballot);
    }
    for (int k = a.outliers + lane; k < a.slots; k += kWarp) put_u16(rec + slots_at + 4 * k, kEmptySlot);
    __syncwarp();
    // Packed LSB first: byte o holds bits 8o..8o+7 of the stream of `bits`-bit codes.
    for (int o = lane; o < slots_at - a.codes_offset; o += kWarp) {
      unsigned byte = 0;
      for (int b = 0; b < 8; ++b) {
        const int bit = 8 * o + b, c = bit / a.bits;
        if (c < D) byte |= (codes[c] >> (bit % a.bits) & 1u) << b;
      }
      rec[a.codes_offset + o] = static_cast<uint8_t>(byte);
    }
  }
  __syncwarp();
  // Records are a whole number of 16-bit units (head_dim is a multiple of 16), 2-byte aligned.
  for (int o = 2 * lane; o < record; o += 2 * kWarp)
    put_u16(out + o, *reinterpret_cast<const uint16_t*>(rec + o));
}

template <int D>
void launch(const AppendParams& p, int batch, const KvquantSide& keys, const KvquantSide& values,
            cudaStream_t stream) {
  // Room for the larger record, 16-byte aligned, then D code bytes: at most 4 KB a block.
  const int room = (std::max(keys.record(D), values.record(D)) + 15) / 16 * 16;
  const size_t smem = static_cast<size_t>(kAppendWarps) * (room + D);
  const dim3 grid((p.n + kAppendWarps - 1) / kAppendWarps, batch * p.kv_heads, 2);
  kvquant_append_kernel<D><<<grid, kAppendThreads, smem, stream>>>(p, keys, values, room);
  VQ_CUDA_CHECK_LAUNCH("kvquant_append_kernel");
}

}  // namespace

void launch_kvquant_append(const AppendParams& p, int batch, const KvquantSide& keys,
                           const KvquantSide& values, cudaStream_t stream) {
  with_head_dim(p.head_dim, "cuda kvquant_nuq append",
                [&]<int D>() { return launch<D>(p, batch, keys, values, stream); });
}

}  // namespace veloxquant::cuda
