// Split decode attention over an fp16 cache: the like-for-like baseline the compressed kernels
// are measured against, with their structure (same splits, tiles, pipeline and epilogue).
// Tiles sit in shared memory with their 16-byte chunks XOR-swizzled by token, so that a lane
// reading its own token's row (scores) and all lanes reading one row (values) hit distinct banks.
#include <cuda_fp16.h>

#include "cuda/attention/launchers.h"
#include "cuda/attention/split_decode.cuh"
#include "cuda/common/check.cuh"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

template <int D>
struct Fp16Tile {
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static constexpr int kBytes = kTileTokens * D * 2;
  __device__ static int slot(int token, int chunk) { return token * kChunks + (chunk ^ (token & 7)); }
};

template <int D>
__device__ void fetch_rows(uint4* dst, const uint8_t* rows, int lane) {
  const auto* src = reinterpret_cast<const uint4*>(rows);
  for (int i = lane; i < kTileTokens * Fp16Tile<D>::kChunks; i += kWarp) {
    const int token = i / Fp16Tile<D>::kChunks, chunk = i % Fp16Tile<D>::kChunks;
    copy16_async(dst + Fp16Tile<D>::slot(token, chunk), src + i);
  }
}

template <int D, int MAXG>
__global__ void __launch_bounds__(kThreads) fp16_attend_kernel(AttendParams p) {
  using Tile = Fp16Tile<D>;
  constexpr int NC = D / kWarp;  // output channels per lane
  extern __shared__ __align__(16) uint8_t smem[];
  float* q_s = reinterpret_cast<float*>(smem);
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  float* p_s = q_s + MAXG * D + warp * kTileTokens * MAXG;  // [token][head]
  uint8_t* stages = smem + sizeof(float) * (MAXG * D + kWarps * kTileTokens * MAXG);
  uint4* kbuf[2] = {reinterpret_cast<uint4*>(stages + (warp * 2 + 0) * 2 * Tile::kBytes),
                    reinterpret_cast<uint4*>(stages + (warp * 2 + 1) * 2 * Tile::kBytes)};
  const int seq = blockIdx.y, split = blockIdx.x;
  load_queries<MAXG>(p, seq, q_s);
  __syncthreads();

  const uint8_t* kseq = p.keys.codes + seq * p.keys.stream_bytes;
  const uint8_t* vseq = p.values.codes + seq * p.values.stream_bytes;
  const size_t row_bytes = D * 2;
  SoftmaxState<MAXG> st;
  float acc[MAXG][NC] = {};
  const auto fetch = [&](uint4* dst, int tile) {
    fetch_rows<D>(dst, kseq + tile * kTileTokens * row_bytes, lane);
    fetch_rows<D>(dst + Tile::kBytes / 16, vseq + tile * kTileTokens * row_bytes, lane);
  };
  for_each_tile(p, split, kbuf, fetch, [&](auto stage, int tile) {
    const uint4* kt = stage;
    const uint4* vt = kt + Tile::kBytes / 16;
    float s[MAXG] = {};
#pragma unroll 4
    for (int c = 0; c < Tile::kChunks; ++c) {
      const uint4 raw = kt[Tile::slot(lane, c)];
      const __half2* h2 = reinterpret_cast<const __half2*>(&raw);
      float kx[8];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float2 f = __half22float2(h2[j]);
        kx[2 * j] = f.x, kx[2 * j + 1] = f.y;
      }
#pragma unroll
      for (int h = 0; h < MAXG; ++h) {
        const float4 a = *reinterpret_cast<const float4*>(q_s + h * D + c * 8);
        const float4 b = *reinterpret_cast<const float4*>(q_s + h * D + c * 8 + 4);
        s[h] += a.x * kx[0] + a.y * kx[1] + a.z * kx[2] + a.w * kx[3] + b.x * kx[4] + b.y * kx[5] +
                b.z * kx[6] + b.w * kx[7];
      }
    }
    const bool valid = tile * kTileTokens + lane < p.main_end;
#pragma unroll
    for (int h = 0; h < MAXG; ++h) s[h] = valid ? s[h] : -INFINITY;
    st.fold(s, acc, p_s, lane, p.group);
    __syncwarp();
    // Lane owns channels lane * NC .. + NC: a half (D = 128) or quarter (D = 64) chunk.
    const int chunk = lane * NC / 8, part = lane * NC % 8;
    for (int t = 0; t < kTileTokens; ++t) {
      const __half* row = reinterpret_cast<const __half*>(vt + Tile::slot(t, chunk)) + part;
      float vx[NC];
#pragma unroll
      for (int j = 0; j < NC; j += 2) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(row + j));
        vx[j] = f.x, vx[j + 1] = f.y;
      }
#pragma unroll
      for (int h = 0; h < MAXG; ++h) {
        const float w = p_s[t * MAXG + h];
#pragma unroll
        for (int j = 0; j < NC; ++j) acc[h][j] += w * vx[j];
      }
    }
    __syncwarp();
});
  async_wait<0>();
  __syncthreads();
  store_and_write_partial<D>(p, st, acc, stages, seq, split);
}

template <int D, int MAXG>
void launch(const AttendParams& p, int batch, cudaStream_t stream) {
  const size_t stage_bytes = static_cast<size_t>(kWarps) * 2 * 2 * Fp16Tile<D>::kBytes;
  const size_t bytes = sizeof(float) * (MAXG * D + kWarps * kTileTokens * MAXG) +
                       std::max(stage_bytes, epilogue_bytes<MAXG>(D));
  launch_split_kernel(fp16_attend_kernel<D, MAXG>, "launch of fp16_attend_kernel", bytes, p,
                      batch, stream);
}

}  // namespace

void launch_fp16_attend(const AttendParams& p, int batch, cudaStream_t stream) {
  const bool small = p.group <= 4;
  if (p.head_dim == 128) return small ? launch<128, 4>(p, batch, stream) : launch<128, 8>(p, batch, stream);
  if (p.head_dim == 64) return small ? launch<64, 4>(p, batch, stream) : launch<64, 8>(p, batch, stream);
  throw Error("cuda fp16 attention: head_dim " + std::to_string(p.head_dim) + "; expected 64 or 128");
}

}  // namespace veloxquant::cuda
