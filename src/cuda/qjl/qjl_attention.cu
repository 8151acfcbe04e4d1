// Split decode attention straight from QJL's sign bits, on tensor cores (tc_decode.cuh). A token
// of a key block with outlier channels O has the CPU codec's estimate
//   q . k ~ w_in <S q_I, sign(S k_I)> + w_out <S' q_O, sign(S' k_O)>,
// q_I the query with O zeroed, q_O its O part, S' the first outlier_proj rows of S, and w_in,
// w_out sqrt(pi/2) / bits times each part's norm (stored as RMS). O changes per block, so instead
// of sketching q_I per block the kernel sketches the whole query once per split block (S q) and
// takes O's share out per tile:
//   <S q_I, z> = <S q, z> - sum_j q_{O_j} <S[:, O_j], z>,   <S' q_O, z'> = sum_j q_{O_j} <S'[:, O_j], z'>.
// Per 16 tokens and k step (16 sign bits) A = the signs themselves as +-1 in fp16 (bits s and
// s + 16 of a word per register, one shift and one LOP3; B takes the sketch rows in that order),
// and three MMAs take it: B = S q (the group's query
// heads on n), B = the block's outlier columns of S (the outlier channels on n) for the inlier
// signs and, over the first outlier_proj bits, for the outlier signs. The two outlier products
// combine per token into E_j = w_out <S'[:, O_j], z'> - w_in <S[:, O_j], z>, whose C layout is
// already the A layout of one more MMA against B = the query at O: the score is
// w_in <S q, z> + E . q_O. Values are KIVI's (kivi_values.cuh: lane quads, or the dense stream
// decoded per tile); the ring of fp16 rows is one more split, as KIVI's. At head_dim 80 and 96
// (5 and 6 outlier channels) records sit at any byte, and are read as funnel shifts of words.
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/attention/head_dims.h"
#include "cuda/attention/tc_decode.cuh"
#include "cuda/common/check.cuh"
#include "cuda/kivi/kivi_values.cuh"
#include "cuda/qjl/qjl_launch.h"
#include "cuda/qjl/qjl_layout.cuh"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

// A tile's key bytes in a stage: the block's outlier channels (at most 8 bytes) and its records,
// each copied from the 4-byte word holding its first byte (a block starts at any byte when the
// outlier count is not a multiple of 4), so up to 3 leading bytes and 3 trailing ones ride along.
struct QjlStage {
  static constexpr int kHeader = 16;
  static constexpr int kKeyBytes = kHeader + kTileTokens * qjl::kTokenBytes + 16;
  __host__ __device__ static constexpr int bytes(int value_block) { return kKeyBytes + 8 * value_block; }
};
static_assert(QjlStage::kKeyBytes % 16 == 0);

// Bits s and s + 16 of a word of signs (1: positive; s <= 15) as the fp16 pair (+-1, +-1): one
// shift and one LOP3 (the bits land on the halves' sign bits, which flip -1 to +1).
__device__ inline uint32_t sign_pair(uint32_t word, int s) {
  return ((word << (15 - s)) & 0x80008000u) ^ 0xBC00BC00u;
}

// Word w of a record staged `shift` bits past the word `at` (0 when the record is 4-byte aligned:
// one load; otherwise two and a funnel shift).
template <bool ALIGNED>
struct RecordWords {
  const uint32_t* at;
  int shift;
  __device__ uint32_t operator[](int w) const {
    if constexpr (ALIGNED) return at[w];
    else return __funnelshift_r(at[w], at[w + 1], shift);
  }
};

// The 16-token half of a tile starting at record r0 (token g; r1, 8 records on, is token g + 8):
// the scores of the group's heads in the C layout.
template <bool ALIGNED>
__device__ void half_scores(RecordWords<ALIGNED> r0, RecordWords<ALIGNED> r1,
                            const uint32_t (&bs)[qjl::kProj / 16][2],
                            const uint32_t (&bo)[qjl::kProj / 16][2], const uint32_t (&bqo)[2],
                            const QjlArgs& q, const MmaLane& ln, float (&s)[4]) {
  constexpr int kInWords = qjl::kProj / 32, kOutWords = qjl::kOutlierProj / 32;
  float sq[4] = {}, tin[4] = {}, tout[4] = {};
#pragma unroll
  for (int w = 0; w < kInWords; ++w) {
    const uint32_t x0 = r0[w], x1 = r1[w];
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const int k = 2 * w + kk, at = 8 * kk + ln.t;
      const uint32_t a[4] = {sign_pair(x0, at), sign_pair(x1, at), sign_pair(x0, at + 4), sign_pair(x1, at + 4)};
      mma_16816(sq, a, bs[k]);
      mma_16816(tin, a, bo[k]);
    }
  }
#pragma unroll
  for (int w = 0; w < kOutWords; ++w) {
    const uint32_t x0 = r0[kInWords + w], x1 = r1[kInWords + w];
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      const int k = 2 * w + kk, at = 8 * kk + ln.t;
      const uint32_t a[4] = {sign_pair(x0, at), sign_pair(x1, at), sign_pair(x0, at + 4), sign_pair(x1, at + 4)};
      mma_16816(tout, a, bo[k]);
    }
  }
  // The norms' word: the inlier RMS in its low half, the outlier RMS in its high one.
  const auto norms = [](uint32_t w) {
    __half2 h;
    memcpy(&h, &w, 4);
    return __half22float2(h);
  };
  const float2 n0 = norms(r0[qjl::kNormsAt / 4]), n1 = norms(r1[qjl::kNormsAt / 4]);
  const float wi0 = q.inlier_scale * n0.x, wo0 = q.outlier_scale * n0.y;
  const float wi1 = q.inlier_scale * n1.x, wo1 = q.outlier_scale * n1.y;
  // E in the C layout (tokens g, g + 8; outliers 2t, 2t + 1) is A's layout for k = 0..7.
  const uint32_t ae[4] = {pack_half2(wo0 * tout[0] - wi0 * tin[0], wo0 * tout[1] - wi0 * tin[1]),
                          pack_half2(wo1 * tout[2] - wi1 * tin[2], wo1 * tout[3] - wi1 * tin[3]), 0u, 0u};
  s[0] = wi0 * sq[0], s[1] = wi0 * sq[1], s[2] = wi1 * sq[2], s[3] = wi1 * sq[3];
  mma_16816(s, ae, bqo);
}

template <int D, int VBITS, int VG>
__device__ void attend_codes(const AttendParams& p, int seq, int main_split, float* q_s, float* sq_s,
                             uint8_t* stages, float* pt) {
  constexpr int NS = qjl::kProj / 16;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const MmaLane ln(lane);
  const QjlArgs qa = p.format.get<QjlArgs>();
  const kivi::ValueLayout vl{D, VBITS, qa.value_group};
  const int vblock = vl.block_bytes(), stage_bytes = QjlStage::bytes(vblock);
  uint8_t* buf[2] = {stages + (warp * 2) * stage_bytes, stages + (warp * 2 + 1) * stage_bytes};
  // The group's queries (times the softmax scale) and their sketches S q, once per block.
  load_queries<kMmaHeads>(p, seq, q_s);
  __syncthreads();
  // Thread r takes sketch rows r, r + 128, ... of every head: independent sums, each load of S^T
  // (adjacent floats across the threads) shared by the heads.
  constexpr int kRows = qjl::kProj / kThreads;
  float sum[kRows][kMmaHeads] = {};
  for (int c = 0; c < D; ++c) {
    float col[kRows];
#pragma unroll
    for (int j = 0; j < kRows; ++j) col[j] = qa.sketch_t[c * qjl::kProj + threadIdx.x + j * kThreads];
#pragma unroll
    for (int h = 0; h < kMmaHeads; ++h) {
      const float qc = q_s[h * D + c];
#pragma unroll
      for (int j = 0; j < kRows; ++j) sum[j][h] = fmaf(col[j], qc, sum[j][h]);
    }
  }
#pragma unroll
  for (int j = 0; j < kRows; ++j)
#pragma unroll
    for (int h = 0; h < kMmaHeads; ++h) sq_s[h * qjl::kProj + threadIdx.x + j * kThreads] = sum[j][h];
  __syncthreads();
  // B fragments of S q, head g, in the sign pairs' order: k step k = 2w + kk takes sketch rows
  // 32w + 8kk + t, + 16 (b[0]) and 32w + 8kk + t + 4, + 20 (b[1]).
  uint32_t bs[NS][2] = {};
  if (ln.g < p.group) {
    const float* sq = sq_s + ln.g * qjl::kProj;
#pragma unroll
    for (int k = 0; k < NS; ++k) {
      const int r = 32 * (k / 2) + 8 * (k % 2) + ln.t;
      bs[k][0] = pack_half2(sq[r], sq[r + 16]), bs[k][1] = pack_half2(sq[r + 4], sq[r + 20]);
    }
  }

  const qjl::KeyLayout kl{qa.outliers, qa.group};
  const uint8_t* kseq = p.keys.codes + seq * p.keys.stream_bytes;
  const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
  // A tile's key block and its first record in global memory.
  const auto key_bytes = [&](int tile, const uint8_t*& block, const uint8_t*& records) {
    const int t0 = p.keys.slot(tile * kTileTokens);
    block = kseq + static_cast<size_t>(t0 / kl.group) * kl.block_bytes();
    records = block + kl.outliers + (t0 % kl.group) * qjl::kTokenBytes;
  };
  const auto misalign = [](const uint8_t* at) {
    return static_cast<int>(reinterpret_cast<uintptr_t>(at) & 3u);
  };
  const auto fetch = [&](uint8_t* dst, int tile) {
    const uint8_t *block, *records;
    key_bytes(tile, block, records);
    // Whole words, from the word holding each part's first byte up to the one holding its last.
    warp_copy_words_async(dst, block - misalign(block), QjlStage::kHeader, lane);
    const int lead = misalign(records);
    warp_copy_words_async(dst + QjlStage::kHeader, records - lead,
                          (lead + kTileTokens * qjl::kTokenBytes + 3) & ~3, lane);
    const int t0 = p.keys.slot(tile * kTileTokens);
    warp_copy_async(dst + QjlStage::kKeyBytes, vseq + static_cast<size_t>(t0 / 4) * vblock, 8 * vblock, lane);
  };

  TcSoftmax st;
  using Values = kivi::ValuesOf<D, VBITS, VG>;
  Values values = kivi::warp_values<D, VBITS, VG>(stages, stage_bytes, warp, vl.group);
  for_each_tile(p, main_split, buf, fetch, [&](uint8_t* stage, int tile) {
    const uint8_t *block, *records;
    key_bytes(tile, block, records);
    const uint8_t* outliers = stage + misalign(block);
    // B of the block's outlier columns of S (column j = g, zero past the outliers), rows as bs
    // (the device keeps the fp16 copy in that pair order).
    uint32_t bo[NS][2] = {};
    if (ln.g < kl.outliers) {
      const uint32_t* col = reinterpret_cast<const uint32_t*>(qa.sketch_t_f16 + outliers[ln.g] * qjl::kProj);
#pragma unroll
      for (int k = 0; k < NS; ++k) bo[k][0] = col[8 * k + ln.t], bo[k][1] = col[8 * k + ln.t + 4];
    }
    // B of the query at the outlier channels: k = outliers 2t, 2t + 1, n = head g.
    // (An odd count leaves the last pair's second half 0.)
    const auto query_at = [&](int j) {
      return ln.g < p.group && j < kl.outliers ? q_s[ln.g * D + outliers[j]] : 0.0f;
    };
    const uint32_t bqo[2] = {pack_half2(query_at(2 * ln.t), query_at(2 * ln.t + 1)), 0u};
    // Record i is staged at word (kHeader + i * kTokenBytes) / 4, `lead` bytes on.
    float s[2][4];
    const uint32_t* staged = reinterpret_cast<const uint32_t*>(stage + QjlStage::kHeader);
    const int lead = misalign(records);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t* r0 = staged + (16 * h + ln.g) * (qjl::kTokenBytes / 4);
      const uint32_t* r1 = r0 + 8 * (qjl::kTokenBytes / 4);
      if (lead == 0) half_scores<true>({r0, 0}, {r1, 0}, bs, bo, bqo, qa, ln, s[h]);
      else half_scores<false>({r0, 8 * lead}, {r1, 8 * lead}, bs, bo, bqo, qa, ln, s[h]);
    }
    kivi::attend_tile_on_values(s, stage + QjlStage::kKeyBytes, tile * kTileTokens, score_mask(p, p.main_end),
                                st, values, pt, ln);
  });
  async_wait<0>();
  __syncthreads();
  values.finish(ln);
  write_tc_partial<D>(p, st, values.acc, Values::channel, stages, seq, blockIdx.x);
}

template <int D, int VBITS, int VG>
__global__ void __launch_bounds__(kThreads) qjl_attend_kernel(AttendParams p) {
  p = for_query(p);
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarp;
  float* pt = reinterpret_cast<float*>(smem) + warp * kPtFloats;  // probabilities, per warp
  float* q_s = reinterpret_cast<float*>(smem) + kWarps * kPtFloats;
  float* sq_s = q_s + kMmaHeads * D;
  uint8_t* stages = reinterpret_cast<uint8_t*>(sq_s + kMmaHeads * qjl::kProj);
  kivi::ring_or_codes<D, VBITS>(p, p.format.get<QjlArgs>().value_group, pt, stages, [&](int seq, int split) {
    attend_codes<D, VBITS, VG>(p, seq, split, q_s, sq_s, stages, pt);
  });
}

template <int D, int VBITS, int VG>
SplitKernel split_kernel(int value_group) {
  const size_t floats = kWarps * kPtFloats + kMmaHeads * (D + qjl::kProj);
  const size_t work = static_cast<size_t>(kWarps) * 2 *
                          QjlStage::bytes(kivi::ValueLayout{D, VBITS, value_group}.block_bytes()) +
                      kivi::dense_rows_bytes<D, VG>();
  return {qjl_attend_kernel<D, VBITS, VG>,
          sizeof(float) * floats + std::max({work, epilogue_bytes<kMmaHeads>(D), kivi::ring_stage_bytes<D>()}),
          "launch of qjl_attend_kernel"};
}

template <int VBITS>
SplitKernel for_head_dim(const AttendParams& p) {
  const int vg = p.format.get<QjlArgs>().value_group;
  const auto make = [&]<int D>() {
    return kivi::for_value_group<D, VBITS>(vg, [vg]<int VG>() { return split_kernel<D, VBITS, VG>(vg); });
  };
  return with_head_dim(p.head_dim, "cuda qjl attention", make);
}

}  // namespace

SplitKernel qjl_split_kernel(const AttendParams& p, int vbits) {
  if (vbits == 2) return for_head_dim<2>(p);
  if (vbits == 4) return for_head_dim<4>(p);
  throw Error("cuda qjl attention: vbits " + std::to_string(vbits) + "; expected 2 or 4");
}

}  // namespace veloxquant::cuda
