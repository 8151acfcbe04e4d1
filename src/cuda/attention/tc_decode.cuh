// What the tensor-core decode kernels share (mma.cuh has the fragment layout). A warp takes a
// 32-token tile at a time:
//   scores  S^T (tokens x heads) = K (tokens x channels) . Q^T, two m16 halves of the tile, the
//           group's query heads on n (up to 8, the rest zero);
//   softmax online per head over the tile, in the C layout: lane (g, t) holds heads 2t, 2t+1 of
//           tokens g and g+8 of each half;
//   values  O^T (channels x heads) += V^T (channels x tokens) . P, the probabilities handed
//           through shared memory (pt, [head][token]) because P is needed in the B layout.
// The block epilogue is split_decode.cuh's write_partial with MAXG = 8.
#pragma once

#include <cmath>

#include "cuda/attention/mma.cuh"
#include "cuda/attention/split_decode.cuh"

namespace veloxquant::cuda {

inline constexpr int kMmaHeads = 8;  // n of the MMA: every query head of a group of up to 8
inline constexpr int kPtStride = 48; // floats per head row of pt: conflict-free float4 reads by (g, t)
inline constexpr int kPtFloats = kMmaHeads * kPtStride;

// The online softmax of a lane's two heads (2t, 2t+1). l is the lane's own partial sum over the
// tokens it holds; the 8 lanes sharing a head add theirs up once, in store().
struct TcSoftmax {
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  // s: a tile's scores in the C layout (masked entries -inf). They become unnormalized
  // probabilities; alpha gets the factor earlier sums must be scaled by. A tile with every token
  // masked (a window that starts past it) adds nothing and leaves the state as it was.
  __device__ void update(float (&s)[2][4], float (&alpha)[2]) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float mx = fmaxf(fmaxf(s[0][j], s[0][j + 2]), fmaxf(s[1][j], s[1][j + 2]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
      const float m_new = fmaxf(m[j], mx);
      const float shift = m_new == -INFINITY ? 0.0f : m_new;  // exp(-inf - shift) = 0, never NaN
      alpha[j] = __expf(m[j] - shift);
      float sum = 0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        s[h][j] = __expf(s[h][j] - shift), s[h][j + 2] = __expf(s[h][j + 2] - shift);
        sum += s[h][j] + s[h][j + 2];
      }
      l[j] = l[j] * alpha[j] + sum;
      m[j] = m_new;
    }
  }

  // The warp's (max, sum) of its heads into ml[warp][kMmaHeads][2].
  __device__ void store(float* ml, int warp, const MmaLane& ln) const {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float sum = l[j];
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      sum += __shfl_xor_sync(0xffffffffu, sum, 8);
      sum += __shfl_xor_sync(0xffffffffu, sum, 16);
      if (ln.g == 0) {
        ml[(warp * kMmaHeads + 2 * ln.t + j) * 2] = m[j];
        ml[(warp * kMmaHeads + 2 * ln.t + j) * 2 + 1] = sum;
      }
    }
  }
};

// Which tokens a query sees and how its scores are shaped: tokens [begin, end) exist for it, and
// a soft cap (Gemma 2's) bends each score before the softmax.
struct ScoreMask {
  int begin = 0, end = 0;
  float softcap = 0;  // 0: scores unchanged
};
// The mask of p's query over tokens below `end` (the fused region's or the whole cache's end).
__device__ inline ScoreMask score_mask(const AttendParams& p, int end) {
  return {p.window_start, end, p.softcap};
}

// A tile's scaled scores (C layout, tokens first_token..first_token + 31) capped, then masked:
// tokens outside [begin, end) get -inf.
__device__ inline void mask_tile(float (&s)[2][4], const MmaLane& ln, int first_token, const ScoreMask& m) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int token = first_token + 16 * h + ln.g + 8 * (r >> 1);
      if (m.softcap != 0.0f) s[h][r] = m.softcap * tanhf(s[h][r] / m.softcap);
      if (token < m.begin || token >= m.end) s[h][r] = -INFINITY;
    }
}

// The tile's probabilities into pt[head][token] for the value pass.
__device__ inline void stage_probabilities(float* pt, const float (&s)[2][4], const MmaLane& ln) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int r = 0; r < 4; ++r) pt[(2 * ln.t + (r & 1)) * kPtStride + 16 * h + ln.g + 8 * (r >> 1)] = s[h][r];
}

// Accumulators of O^T in the C layout, one per m16 tile of channels, scaled by the lane's alphas.
template <int NM>
__device__ void rescale(float (&acc)[NM][4], const float (&alpha)[2]) {
#pragma unroll
  for (int m = 0; m < NM; ++m)
#pragma unroll
    for (int r = 0; r < 4; ++r) acc[m][r] *= alpha[r & 1];
}

// The epilogue: each warp's O^T tiles (tile m covers channels channel_of(m, row), row 0..15) and
// softmax states into shared memory `smem` (free by now), then write_partial.
template <int D, int NM, class ChannelOf>
__device__ void write_tc_partial(const AttendParams& p, const TcSoftmax& st, const float (&acc)[NM][4],
                                 ChannelOf channel_of, void* smem, int seq, int split) {
  const int warp = threadIdx.x / kWarp;
  const MmaLane ln(threadIdx.x % kWarp);
  float* o = reinterpret_cast<float*>(smem);
  float* ml = o + kWarps * kMmaHeads * D;
#pragma unroll
  for (int m = 0; m < NM; ++m)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      o[(warp * kMmaHeads + 2 * ln.t + (r & 1)) * D + channel_of(m, ln.g + 8 * (r >> 1))] = acc[m][r];
  st.store(ml, warp, ln);
  write_partial<kMmaHeads>(p, o, ml, seq, split);
}

}  // namespace veloxquant::cuda
