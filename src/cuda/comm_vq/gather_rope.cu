// CommVQ's keys at attention time (veloxquant/cuda_vq.h, comm_vq_gather_rope): a block of 8 warps
// takes 8 tokens, computes their rotation angles once for all KV heads, then each warp, for each
// KV head in turn, sums its token's centroids (each lane a stripe of channels read as float4 from
// the codebooks: the centroid rows are contiguous, so coalesced), stages the sum in shared memory
// so that a lane can read both coordinates of its pairs (NeoX pairs lie d/2 apart), rotates them
// with the CPU's double-precision angles and writes the key once. The unfused path, a gather that
// writes unrotated keys and a RoPE pass that reads and rewrites them, moves twice the bytes.
#include <cmath>
#include <string>

#include "cuda/common/check.cuh"
#include "cuda/common/device_math.cuh"
#include "veloxquant/cuda_vq.h"

namespace veloxquant::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxDim = 256;

// The launch's RoPE: apply_rope's frequencies (computed on the host with its expression).
struct RopeTable {
  double inv_freq[kMaxDim / 2];
  int half = 0;  // rotated pairs
  bool neox = false;
};

__global__ void __launch_bounds__(kWarps * kWarp) gather_rope_kernel(const uint8_t* codes, const float* codebooks,
                                                                     int books, int entries, int kv_heads,
                                                                     const int64_t* positions, RopeTable rope,
                                                                     int tokens, int dim, float* out) {
  __shared__ float rows[kWarps][kMaxDim];
  __shared__ double cosines[kWarps][kMaxDim / 2], sines[kWarps][kMaxDim / 2];
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int first = blockIdx.x * kWarps, t = first + warp;
  // The angles depend on the token alone: computed once here for the block's tokens and shared
  // by every KV head (double-precision sincos is what bounds this kernel).
  for (int i = threadIdx.x; i < kWarps * rope.half; i += kWarps * kWarp) {
    const int w = i / rope.half, pair = i % rope.half;
    if (first + w >= tokens) continue;
    const double angle = __dmul_rn(static_cast<double>(positions[first + w]), rope.inv_freq[pair]);
    sincos(angle, &sines[w][pair], &cosines[w][pair]);
  }
  __syncthreads();
  if (t >= tokens) return;
  float* row = rows[warp];
  for (int h = 0; h < kv_heads; ++h) {
    const uint8_t* code = codes + (static_cast<size_t>(h) * tokens + t) * books;
    const float* book = codebooks + static_cast<size_t>(h) * books * entries * dim;
    for (int c = 4 * lane; c < dim; c += 4 * kWarp) {
      float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      for (int b = 0; b < books; ++b) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(book + (static_cast<size_t>(b) * entries + code[b]) * dim + c));
        sum.x = __fadd_rn(sum.x, v.x), sum.y = __fadd_rn(sum.y, v.y);
        sum.z = __fadd_rn(sum.z, v.z), sum.w = __fadd_rn(sum.w, v.w);
      }
      *reinterpret_cast<float4*>(row + c) = sum;
    }
    __syncwarp();
    float* key = out + (static_cast<size_t>(h) * tokens + t) * dim;
    // Pair i: coordinates (2i, 2i + 1), or (i, i + half) for NeoX; either way the pairs cover the
    // first rope.dims channels and the rest are copied as they are.
    for (int i = lane; i < rope.half; i += kWarp) {
      const int a = rope.neox ? i : 2 * i, b = rope.neox ? i + rope.half : 2 * i + 1;
      float x0 = row[a], x1 = row[b];
      rotate_pair(x0, x1, cosines[warp][i], sines[warp][i]);
      key[a] = x0, key[b] = x1;
    }
    for (int c = 2 * rope.half + lane; c < dim; c += kWarp) key[c] = row[c];
    __syncwarp();  // the row is rewritten for the next head
  }
}

}  // namespace

void comm_vq_gather_rope(const uint8_t* codes, const float* codebooks, size_t books, size_t entries,
                         const int64_t* positions, const RopeParams& rope, size_t kv_heads, size_t tokens,
                         size_t dim, float* out, void* stream) {
  if (dim == 0 || dim % 4 != 0 || dim > size_t(kMaxDim)) {
    throw Error("comm_vq_gather_rope: head_dim " + std::to_string(dim) + "; expected a multiple of 4 up to " +
                std::to_string(kMaxDim));
  }
  if (rope.dims % 2 != 0 || rope.dims > dim) {
    throw Error("comm_vq_gather_rope: rope dims " + std::to_string(rope.dims) + "; expected an even number <= head_dim " +
                std::to_string(dim));
  }
  if (books == 0 || entries == 0 || entries > 256) {
    throw Error("comm_vq_gather_rope: " + std::to_string(books) + " codebooks of " + std::to_string(entries) +
                " centroids; expected at least 1 codebook of 1 to 256 (u8 codes)");
  }
  if (kv_heads == 0) throw Error("comm_vq_gather_rope: 0 KV heads; expected at least 1");
  if (tokens == 0) return;
  RopeTable table;
  table.half = static_cast<int>(rope.dims / 2);
  table.neox = rope.layout == RopeLayout::Neox;
  if (rope.magnitude != 1.0f) {
    throw Error("comm_vq_gather_rope: RoPE magnitude " + std::to_string(rope.magnitude) +
                " (YaRN's attention factor); the CUDA kernels rotate with magnitude 1 only");
  }
  for (int i = 0; i < table.half; ++i) table.inv_freq[i] = rope_inverse_frequency(rope, static_cast<size_t>(i));
  const unsigned blocks = static_cast<unsigned>((tokens + kWarps - 1) / kWarps);
  gather_rope_kernel<<<blocks, kWarps * kWarp, 0, static_cast<cudaStream_t>(stream)>>>(
      codes, codebooks, static_cast<int>(books), static_cast<int>(entries), static_cast<int>(kv_heads), positions, table,
      static_cast<int>(tokens), static_cast<int>(dim), out);
  VQ_CUDA_CHECK_LAUNCH("gather_rope_kernel");
}

}  // namespace veloxquant::cuda
