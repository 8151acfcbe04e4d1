// Product-VQ nearest-centroid assignment (the encode of src/codecs/vecinfer/vecinfer_key_codec.cpp,
// after the key transform): one block per (tile of rows, sub-space) stages that sub-space's
// codebook in shared memory; one thread per row holds its sub-vector in registers and runs the
// argmin over the centroids, every thread of a warp reading the same centroid (a broadcast). The
// distances live one at a time in a register: no [rows x centroids] tensor is ever written.
//
// The CPU sums each squared distance in double; here it is f32, so two centroids whose distances
// lie within f32 rounding of each other may be ordered differently (the parity test counts such
// ties apart). The lowest index wins an exact tie, as on the CPU.
#include <cfloat>

#include "cuda/common/check.cuh"
#include "veloxquant/cuda_vq.h"

namespace veloxquant::cuda {
namespace {

constexpr int kAssignRows = 256;  // rows (threads) per block

template <int Dims>
__global__ void __launch_bounds__(kAssignRows) assign_kernel(const float* x, size_t n, int dim,
                                                             const float* codebooks, int centroids,
                                                             uint8_t* codes) {
  extern __shared__ float4 book[];  // this sub-space's [centroids][Dims]
  constexpr int kVec = Dims / 4;
  const int s = blockIdx.y, subspaces = dim / Dims;
  const auto* src = reinterpret_cast<const float4*>(codebooks) + size_t(s) * centroids * kVec;
  for (int i = threadIdx.x; i < centroids * kVec; i += blockDim.x) book[i] = __ldg(src + i);
  __syncthreads();
  const size_t t = blockIdx.x * size_t(kAssignRows) + threadIdx.x;
  if (t >= n) return;
  float4 v[kVec];
  const auto* row = reinterpret_cast<const float4*>(x + t * dim + s * Dims);
#pragma unroll
  for (int k = 0; k < kVec; ++k) v[k] = __ldg(row + k);
  float best_d = FLT_MAX;
  int best = 0;
  for (int j = 0; j < centroids; ++j) {
    float d = 0;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const float4 c = book[j * kVec + k];
      const float e0 = v[k].x - c.x, e1 = v[k].y - c.y, e2 = v[k].z - c.z, e3 = v[k].w - c.w;
      d = fmaf(e0, e0, d), d = fmaf(e1, e1, d), d = fmaf(e2, e2, d), d = fmaf(e3, e3, d);
    }
    if (d < best_d) best_d = d, best = j;
  }
  codes[t * subspaces + s] = static_cast<uint8_t>(best);
}

template <int Dims>
void launch_assign(const float* x, size_t n, size_t dim, const float* codebooks, size_t centroids,
                   uint8_t* codes, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((n + kAssignRows - 1) / kAssignRows), static_cast<unsigned>(dim / Dims));
  const size_t smem = centroids * Dims * sizeof(float);
  assign_kernel<Dims><<<grid, kAssignRows, smem, stream>>>(x, n, static_cast<int>(dim), codebooks,
                                                           static_cast<int>(centroids), codes);
  VQ_CUDA_CHECK_LAUNCH("assign_kernel");
}

}  // namespace

void vq_assign(const float* x, size_t n, size_t dim, const float* codebooks, size_t dims,
               size_t centroids, uint8_t* codes, void* stream) {
  if ((dims != 4 && dims != 8 && dims != 16) || dim % dims != 0) {
    throw Error("vq_assign: sub-vectors of " + std::to_string(dims) + " dimensions with head_dim " +
                std::to_string(dim) + "; expected 4, 8 or 16 dividing head_dim");
  }
  if (centroids < 1 || centroids > 256) {
    throw Error("vq_assign: " + std::to_string(centroids) + " centroids; expected 1 to 256 (u8 codes)");
  }
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0 || reinterpret_cast<uintptr_t>(codebooks) % 16 != 0) {
    throw Error("vq_assign: rows and codebooks are read 16 bytes at a time; expected 16-byte aligned "
                "device pointers");
  }
  if (n == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  if (dims == 4) launch_assign<4>(x, n, dim, codebooks, centroids, codes, s);
  if (dims == 8) launch_assign<8>(x, n, dim, codebooks, centroids, codes, s);
  if (dims == 16) launch_assign<16>(x, n, dim, codebooks, centroids, codes, s);
}

}  // namespace veloxquant::cuda
