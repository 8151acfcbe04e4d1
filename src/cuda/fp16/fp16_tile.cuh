// A 32-token tile of fp16 key and value rows in shared memory, attended on tensor cores
// (tc_decode.cuh): the fp16 cache's kernel runs it over the whole sequence, KIVI's kernel over
// its ring of residual rows. Rows sit with their 16-byte chunks XOR-swizzled by token, so that
// ldmatrix's eight rows of one chunk hit distinct banks (the chunks past the last whole group of
// 8, in a row of 80 or 96 channels, stay in place).
#pragma once

#include <cuda_fp16.h>

#include "cuda/attention/tc_decode.cuh"

namespace veloxquant::cuda {

template <int D>
struct Fp16Tile {
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static constexpr int kBytes = kTileTokens * D * 2;
  static constexpr int kSwizzled = kChunks / 8 * 8;  // chunks in whole groups of 8 (80, 96: the first 8)
  __device__ static int slot(int token, int chunk) {
    return token * kChunks + (chunk < kSwizzled ? chunk ^ (token & 7) : chunk);
  }
};

// B fragments of Q^T for lane (g, t): head g of the KV head's group, channels 16k + 2t.. and
// 16k + 2t + 8.., in fp16 as given; heads past the group are zero.
template <int D>
__device__ void load_query_fragments(const AttendParams& p, int seq, const MmaLane& ln, uint32_t (&bq)[D / 16][2]) {
#pragma unroll
  for (int k = 0; k < D / 16; ++k) bq[k][0] = bq[k][1] = 0;
  if (ln.g >= p.group) return;
  // seq = b * kv_heads + kv head, and the group's query heads are consecutive.
  const uint32_t* q = reinterpret_cast<const uint32_t*>(p.q) + (static_cast<size_t>(seq) * p.group + ln.g) * D / 2;
#pragma unroll
  for (int k = 0; k < D / 16; ++k) bq[k][0] = q[8 * k + ln.t], bq[k][1] = q[8 * k + ln.t + 4];
}

// O^T += V^T P for a tile of value rows vt (Fp16Tile layout) and the warp's probabilities pt,
// each times the f32 at value_norm + token * norm_stride bytes when value_norm is given (a
// per-token factor the values carry, in records that may be only 2-byte aligned). The O^T
// accumulators: m tile m = channels 16m..16m+15.
template <int D>
__device__ void sum_value_rows(const uint4* vt, const float* pt, float (&acc)[D / 16][4], const MmaLane& ln,
                               const uint8_t* value_norm = nullptr, int norm_stride = 0) {
  using Tile = Fp16Tile<D>;
  const int lane = ln.g * 4 + ln.t, mat = lane / 8, row = lane % 8;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int t0 = 16 * h + 2 * ln.t;  // tokens t0, t0 + 1, t0 + 8, t0 + 9 of the B fragment
    const float* ph = pt + ln.g * kPtStride + t0;
    float w[4] = {ph[0], ph[1], ph[8], ph[9]};
    if (value_norm != nullptr) {
      w[0] *= load_f32<false>(value_norm + t0 * norm_stride);
      w[1] *= load_f32<false>(value_norm + (t0 + 1) * norm_stride);
      w[2] *= load_f32<false>(value_norm + (t0 + 8) * norm_stride);
      w[3] *= load_f32<false>(value_norm + (t0 + 9) * norm_stride);
    }
    const uint32_t b[2] = {pack_half2(w[0], w[1]), pack_half2(w[2], w[3])};
    // Values as A = V^T (channels x tokens), transposed from rows: (tokens +0/+8) x (chunk +0/+1).
    const int token = 16 * h + 8 * (mat >> 1) + row;
#pragma unroll
    for (int m = 0; m < D / 16; ++m) {
      uint32_t a[4];
      ldmatrix_x4_trans(a, vt + Tile::slot(token, 2 * m + (mat & 1)));
      mma_16816(acc[m], a, b);
    }
  }
}

// The part of a tile after its scores: s (C layout, before the softmax scale) is scaled, capped
// and masked (tokens first_token.. outside the mask's range), joins the online softmax, and the
// values vt are summed with the probabilities (sum_value_rows). The softmax state, the O^T
// accumulators and the warp's probability buffer pt move on.
template <int D>
__device__ void attend_tile_values(float (&s)[2][4], const uint4* vt, float scale, int first_token,
                                   const ScoreMask& mask, TcSoftmax& st, float (&acc)[D / 16][4], float* pt,
                                   const MmaLane& ln, const uint8_t* value_norm = nullptr,
                                   int norm_stride = 0) {
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int r = 0; r < 4; ++r) s[h][r] *= scale;
  mask_tile(s, ln, first_token, mask);
  float alpha[2];
  st.update(s, alpha);
  rescale(acc, alpha);
  stage_probabilities(pt, s, ln);
  __syncwarp();
  sum_value_rows<D>(vt, pt, acc, ln, value_norm, norm_stride);
  __syncwarp();
}

// The scores of a tile of fp16 key rows kt (Fp16Tile layout) against the query fragments bq, in
// the C layout, before the softmax scale.
template <int D>
__device__ void fp16_tile_scores(const uint4* kt, const uint32_t (&bq)[D / 16][2], float (&s)[2][4],
                                 const MmaLane& ln) {
  using Tile = Fp16Tile<D>;
  // ldmatrix row addresses: lane i gives row i % 8 of matrix i / 8.
  const int lane = ln.g * 4 + ln.t, mat = lane / 8, row = lane % 8;
#pragma unroll
  for (int k = 0; k < D / 16; ++k) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // keys as A (tokens x channels): (tokens +0/+8) x (chunk +0/+1)
      uint32_t a[4];
      ldmatrix_x4(a, kt + Tile::slot(16 * h + 8 * (mat & 1) + row, 2 * k + (mat >> 1)));
      mma_16816(s[h], a, bq[k]);
    }
  }
}

// One tile of fp16 rows: keys kt and values vt (Fp16Tile layout), then attend_tile_values.
template <int D>
__device__ void attend_fp16_tile(const uint4* kt, const uint4* vt, const uint32_t (&bq)[D / 16][2],
                                 float scale, int first_token, const ScoreMask& mask, TcSoftmax& st,
                                 float (&acc)[D / 16][4], float* pt, const MmaLane& ln) {
  float s[2][4] = {};
  fp16_tile_scores<D>(kt, bq, s, ln);
  attend_tile_values<D>(s, vt, scale, first_token, mask, st, acc, pt, ln);
}

// m tile m of attend_fp16_tile's accumulators holds channels 16m..16m+15.
__device__ inline int fp16_tile_channel(int m, int row) { return 16 * m + row; }

}  // namespace veloxquant::cuda
