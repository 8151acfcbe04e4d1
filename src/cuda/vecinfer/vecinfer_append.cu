// VecInfer's keys on append (codecs/vecinfer/vecinfer_key_codec.cpp): one block per (appended
// token, sequence x KV head), one thread per coordinate for the transform and per centroid for
// the search. The CPU codec's float operations in its order: each coordinate divided by its
// smoothing factor, the rotation (rotation.cuh), then for each sub-space the squared distance to
// every centroid summed in double from coordinate 0 up (no fused multiply-add: the CPU library is
// built without contraction), and the nearest centroid, the lowest index on a tie; so the indices
// match the CPU's bytewise.
#include <cfloat>

#include "cuda/common/appended_rows.cuh"
#include "cuda/common/check.cuh"
#include "cuda/common/rotation.cuh"
#include "cuda/vecinfer/vecinfer_launch.h"

namespace veloxquant::cuda {
namespace {

constexpr int kAppendThreads = 256;  // >= head_dim and >= centroids
constexpr int kAppendWarps = kAppendThreads / kWarp;

// (distance, index) with the smaller distance, the lower index on a tie.
__device__ inline void keep_nearest(double& d, int& j, double od, int oj) {
  if (od < d || (od == d && oj < j)) d = od, j = oj;
}

__global__ void __launch_bounds__(kAppendThreads)
    vecinfer_key_append_kernel(AppendParams p, VecinferDevice v) {
  extern __shared__ float y[];  // head_dim floats
  __shared__ double warp_d[kAppendWarps];
  __shared__ int warp_j[kAppendWarps];
  const int d = p.head_dim, c = threadIdx.x, t = blockIdx.x, seq = blockIdx.y, h = seq % p.kv_heads;
  const int subspaces = v.subspaces, dims = d / subspaces, lane = c % kWarp, warp = c / kWarp;
  float x = 0;
  if (c < d) x = __fdiv_rn(appended_value(p, p.k, true, seq, t, c), v.smooth[h * d + c]);
  x = rotate_coordinate(x, c, d, v.key_signs, v.key_rotation, v.hadamard_scale, y);
  __syncthreads();
  if (c < d) y[c] = x;
  __syncthreads();
  uint8_t* out = p.keys.codes + seq * p.keys.stream_bytes +
                 static_cast<size_t>(p.keys.slot(p.old_tokens + t)) * subspaces;
  for (int s = 0; s < subspaces; ++s) {
    double dist = DBL_MAX;
    int best = c;
    if (c < v.centroids) {
      const float* centroid = v.codebooks +
                              ((static_cast<size_t>(h) * subspaces + s) * v.centroids + c) * dims;
      double sum = 0;
      for (int k = 0; k < dims; ++k) {
        const double e = __dsub_rn(static_cast<double>(y[s * dims + k]), static_cast<double>(centroid[k]));
        sum = __dadd_rn(sum, __dmul_rn(e, e));
      }
      dist = sum;
    }
    for (int off = kWarp / 2; off > 0; off >>= 1)
      keep_nearest(dist, best, __shfl_down_sync(0xffffffffu, dist, off),
                   __shfl_down_sync(0xffffffffu, best, off));
    if (lane == 0) warp_d[warp] = dist, warp_j[warp] = best;
    __syncthreads();
    if (c == 0) {
      for (int w = 1; w < kAppendWarps; ++w) keep_nearest(dist, best, warp_d[w], warp_j[w]);
      out[s] = static_cast<uint8_t>(best);
    }
    __syncthreads();
  }
}

}  // namespace

void launch_vecinfer_key_append(const AppendParams& p, int batch, const VecinferDevice& t,
                                cudaStream_t stream) {
  vecinfer_key_append_kernel<<<dim3(p.n, batch * p.kv_heads), kAppendThreads, p.head_dim * sizeof(float),
                               stream>>>(p, t);
  VQ_CUDA_CHECK_LAUNCH("vecinfer_key_append_kernel");
}

}  // namespace veloxquant::cuda
