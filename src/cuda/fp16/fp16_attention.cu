// Split decode attention over an fp16 cache: the like-for-like baseline the compressed kernels
// are measured against, with their structure (same splits, tiles, pipeline and epilogue) and
// tensor cores for both products (fp16_tile.cuh).
#include <cuda_fp16.h>

#include "cuda/fp16/fp16_launch.h"
#include "cuda/attention/tc_decode.cuh"
#include "cuda/fp16/fp16_tile.cuh"
#include "cuda/common/check.cuh"
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

template <int D>
__global__ void __launch_bounds__(kThreads) fp16_attend_kernel(AttendParams p) {
  p = for_query(p);
  using Tile = Fp16Tile<D>;
  constexpr int NK = D / 16;  // k steps of the scores, m tiles of the values
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const MmaLane ln(lane);
  float* pt = reinterpret_cast<float*>(smem) + warp * kPtFloats;
  uint8_t* stages = smem + sizeof(float) * kWarps * kPtFloats;
  uint4* kbuf[2] = {reinterpret_cast<uint4*>(stages + (warp * 2 + 0) * 2 * Tile::kBytes),
                    reinterpret_cast<uint4*>(stages + (warp * 2 + 1) * 2 * Tile::kBytes)};
  const int seq = blockIdx.y, split = blockIdx.x;

  uint32_t bq[NK][2];
  load_query_fragments<D>(p, seq, ln, bq);

  const uint8_t* kseq = p.keys.codes + seq * p.keys.stream_bytes;
  const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
  const size_t row_bytes = D * 2;
  TcSoftmax st;
  float acc[NK][4] = {};
  const auto fetch = [&](uint4* dst, int tile) {
    fetch_rows<D>(dst, kseq + tile * kTileTokens * row_bytes, lane);
    fetch_rows<D>(dst + Tile::kBytes / 16, vseq + tile * kTileTokens * row_bytes, lane);
  };
  for_each_tile(p, split, kbuf, fetch, [&](const uint4* stage, int tile) {
    attend_fp16_tile<D>(stage, stage + Tile::kBytes / 16, bq, p.scale, tile * kTileTokens, p.main_end, st, acc, pt, ln);
  });
  async_wait<0>();
  __syncthreads();
  write_tc_partial<D>(p, st, acc, fp16_tile_channel, stages, seq, split);
}

template <int D>
SplitKernel split_kernel() {
  const size_t stage_bytes = static_cast<size_t>(kWarps) * 2 * 2 * Fp16Tile<D>::kBytes;
  return {fp16_attend_kernel<D>, sizeof(float) * kWarps * kPtFloats + std::max(stage_bytes, epilogue_bytes<kMmaHeads>(D)),
          "launch of fp16_attend_kernel"};
}

}  // namespace

SplitKernel fp16_split_kernel(const AttendParams& p) {
  if (p.head_dim == 128) return split_kernel<128>();
  if (p.head_dim == 64) return split_kernel<64>();
  throw Error("cuda fp16 attention: head_dim " + std::to_string(p.head_dim) + "; expected 64 or 128");
}

}  // namespace veloxquant::cuda
