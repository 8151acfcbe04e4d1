// Split decode attention over an fp16 cache: the like-for-like baseline the compressed kernels
// are measured against, with their structure (same splits, tiles, pipeline and epilogue) and
// tensor cores for both products (fp16_tile.cuh).
#include <cuda_fp16.h>

#include "cuda/attention/head_dims.h"
#include "cuda/attention/tc_decode.cuh"
#include "cuda/common/check.cuh"
#include "cuda/fp16/fp16_launch.h"
#include "cuda/fp16/fp16_tile.cuh"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

template <int D>
__device__ void fetch_rows(uint4* dst, const uint8_t* rows, int lane) {
  const auto* src = reinterpret_cast<const uint4*>(rows);
  for (int i = lane; i < kTileTokens * Fp16Tile<D>::kChunks; i += kWarp) {
    const int token = i / Fp16Tile<D>::kChunks, chunk = i % Fp16Tile<D>::kChunks;
    copy16_async(dst + Fp16Tile<D>::slot(token, chunk), src + i);
  }
}

// Tile buffers per warp: two (the next tile's copies overlap this one's math) but for head_dim
// 256, whose two 32 KB stages per warp would not fit in shared memory.
template <int D>
constexpr int kFp16Stages = D > 128 ? 1 : 2;

template <int D>
__global__ void __launch_bounds__(kThreads) fp16_attend_kernel(AttendParams p) {
  p = for_query(p);
  using Tile = Fp16Tile<D>;
  constexpr int S = kFp16Stages<D>;
  constexpr int NK = D / 16;  // k steps of the scores, m tiles of the values
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const MmaLane ln(lane);
  float* pt = reinterpret_cast<float*>(smem) + warp * kPtFloats;
  uint8_t* stages = smem + sizeof(float) * kWarps * kPtFloats;
  uint4* kbuf[S];
  for (int i = 0; i < S; ++i) kbuf[i] = reinterpret_cast<uint4*>(stages + (warp * S + i) * 2 * Tile::kBytes);
  const int seq = blockIdx.y, split = blockIdx.x;

  uint32_t bq[NK][2];
  load_query_fragments<D>(p, seq, ln, bq);

  const uint8_t* kseq = p.keys.codes + seq * p.keys.stream_bytes;
  const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
  const size_t row_bytes = D * 2;
  TcSoftmax st;
  float acc[NK][4] = {};
  const auto fetch = [&](uint4* dst, int tile) {
    const size_t first = p.keys.slot(tile * kTileTokens);
    fetch_rows<D>(dst, kseq + first * row_bytes, lane);
    fetch_rows<D>(dst + Tile::kBytes / 16, vseq + first * row_bytes, lane);
  };
  for_each_tile(p, split, kbuf, fetch, [&](const uint4* stage, int tile) {
    attend_fp16_tile<D>(stage, stage + Tile::kBytes / 16, bq, p.scale, tile * kTileTokens,
                        score_mask(p, p.main_end), st, acc, pt, ln);
  });
  async_wait<0>();
  __syncthreads();
  write_tc_partial<D>(p, st, acc, fp16_tile_channel, stages, seq, split);
}

template <int D>
SplitKernel split_kernel() {
  const size_t stage_bytes = static_cast<size_t>(kWarps) * kFp16Stages<D> * 2 * Fp16Tile<D>::kBytes;
  return {fp16_attend_kernel<D>, sizeof(float) * kWarps * kPtFloats + std::max(stage_bytes, epilogue_bytes<kMmaHeads>(D)),
          "launch of fp16_attend_kernel"};
}

}  // namespace

SplitKernel fp16_split_kernel(const AttendParams& p) {
  return with_head_dim(p.head_dim, "cuda fp16 attention", [&]<int D>() { return split_kernel<D>(); });
}

}  // namespace veloxquant::cuda
