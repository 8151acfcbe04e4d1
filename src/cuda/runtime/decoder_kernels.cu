// The forward pass's small kernels (decoder_kernels.h).
#include "cuda/common/check.cuh"
#include "cuda/common/device_math.cuh"
#include "cuda/runtime/decoder_kernels.h"

namespace veloxquant::cuda {
namespace {

constexpr int kBlock = 256;

int blocks_for(size_t n) { return static_cast<int>((n + kBlock - 1) / kBlock); }

__device__ inline float to_float(__half x) { return __half2float(x); }
__device__ inline float to_float(float x) { return x; }
template <class T>
__device__ inline T from_float(float x);
template <>
__device__ inline __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ inline float from_float<float>(float x) { return x; }

template <class T>
__global__ void embed_rows_kernel(const T* table, const int32_t* tokens, int d, float scale, float* x) {
  const size_t t = blockIdx.x;
  const T* row = table + static_cast<size_t>(tokens[t]) * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x)
    x[t * d + i] = scale == 1.0f ? to_float(row[i]) : __fmul_rn(to_float(row[i]), scale);
}

// One block per row. Double partial sums, reduced through shared memory.
template <class T>
__global__ void rms_norm_kernel(const float* x, const float* w, int d, float eps, T* y) {
  __shared__ double partial[kBlock];
  const size_t t = blockIdx.x;
  const float* row = x + t * d;
  double ss = 0;
  for (int i = threadIdx.x; i < d; i += blockDim.x) ss += static_cast<double>(row[i]) * row[i];
  partial[threadIdx.x] = ss;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o >>= 1) {
    if (static_cast<int>(threadIdx.x) < o) partial[threadIdx.x] += partial[threadIdx.x + o];
    __syncthreads();
  }
  const float scale = static_cast<float>(1.0 / sqrt(partial[0] / static_cast<double>(d) + eps));
  for (int i = threadIdx.x; i < d; i += blockDim.x) y[t * d + i] = from_float<T>(__fmul_rn(__fmul_rn(row[i], scale), w[i]));
}

__global__ void add_bias_kernel(float* y, const float* bias, size_t total, int width) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < total) y[i] += bias[i % width];
}

// One block per (row, head), one thread per pair or unrotated channel pair; row t is token
// t / batch of sequence t % batch.
__global__ void rope_rows_kernel(RopeRows r) {
  const int t = blockIdx.x, h = blockIdx.y, d = r.head_dim, i = t / r.batch, b = t % r.batch;
  const float* in = r.x + (static_cast<size_t>(t) * r.heads + h) * d;
  __half* out = r.out + (r.head_major ? ((static_cast<size_t>(b) * r.heads + h) * r.n + i) * d
                                      : (static_cast<size_t>(t) * r.heads + h) * d);
  // The CPU's query scale: its own factor, then the temperature's, in float.
  float scale = r.scale;
  if (r.temperature_scale != 0.0f) {
    const int64_t periods = r.positions[i] / r.temperature_floor;
    scale = __fmul_rn(
        scale, __fadd_rn(1.0f, __fmul_rn(r.temperature_scale, logf(static_cast<float>(periods) + 1.0f))));
  }
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    const int pair = r.neox ? (c < r.rope_half ? c : c - r.rope_half) : c / 2;
    const bool rotated = r.neox ? (c < 2 * r.rope_half) : pair < r.rope_half;
    if (!rotated) {
      out[c] = __float2half_rn(__fmul_rn(in[c], scale));
      continue;
    }
    const int a = r.neox ? pair : 2 * pair, b = r.neox ? pair + r.rope_half : 2 * pair + 1;
    float x0 = in[a], x1 = in[b];
    rope_pair(x0, x1, r.inv_freq[pair], r.positions[i], r.magnitude);
    out[c] = __float2half_rn(__fmul_rn(c == a ? x0 : x1, scale));
  }
}

template <class T>
__global__ void gated_kernel(bool gelu, const float* gate, const float* up, size_t n, T* out) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  if (!gelu) {
    out[i] = from_float<T>(__fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), up[i]));
    return;
  }
  // 0.5 x (1 + tanh(sqrt(2 / pi) x (1 + 0.044715 x^2))), as ggml and Gemma's reference compute it.
  constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
  const float inner = kSqrt2OverPi * g * (1.0f + kCubic * g * g);
  out[i] = from_float<T>(0.5f * g * (1.0f + tanhf(inner)) * up[i]);
}

__global__ void softcap_kernel(float* x, size_t n, float cap) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] = cap * tanhf(x[i] / cap);
}

// Values per 16-byte load, and their sum of products with x's matching values.
__device__ inline float dot16(const uint4& w, const uint4& x, __half) {
  const __half2* a = reinterpret_cast<const __half2*>(&w);
  const __half2* b = reinterpret_cast<const __half2*>(&x);
  float sum = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 u = __half22float2(a[i]), v = __half22float2(b[i]);
    sum = fmaf(u.x, v.x, sum), sum = fmaf(u.y, v.y, sum);
  }
  return sum;
}
__device__ inline float dot16(const uint4& w, const uint4& x, float) {
  const float4 a = *reinterpret_cast<const float4*>(&w), b = *reinterpret_cast<const float4*>(&x);
  return fmaf(a.x, b.x, fmaf(a.y, b.y, fmaf(a.z, b.z, a.w * b.w)));
}

constexpr int kGemvWarps = 8;

// One warp per row: lane l reads 16-byte chunks l, l + 32, ... of the row (coalesced 512-byte
// warp loads, several in flight), then the warp sums its lanes.
template <class T>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(const T* w, int rows, int chunks, const T* x, float* y) {
  const int row = blockIdx.x * kGemvWarps + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const uint4* wr = reinterpret_cast<const uint4*>(w) + static_cast<size_t>(row) * chunks;
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  float sum = 0;
#pragma unroll 4
  for (int c = lane; c < chunks; c += 32) sum += dot16(__ldg(wr + c), __ldg(xr + c), T{});
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) y[row] = sum;
}

__global__ void add_kernel(float* x, const float* y, size_t n) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) x[i] += y[i];
}

__global__ void to_half_kernel(const float* x, size_t n, __half* y) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = __float2half_rn(x[i]);
}

}  // namespace

template <class T>
void launch_embed_rows(const T* table, const int32_t* tokens, int n, int d, float scale, float* x,
                       cudaStream_t s) {
  embed_rows_kernel<<<n, kBlock, 0, s>>>(table, tokens, d, scale, x);
  VQ_CUDA_CHECK_LAUNCH("embed_rows_kernel");
}

template <class T>
void launch_rms_norm(const float* x, const float* w, int n, int d, float eps, T* y, cudaStream_t s) {
  rms_norm_kernel<<<n, kBlock, 0, s>>>(x, w, d, eps, y);
  VQ_CUDA_CHECK_LAUNCH("rms_norm_kernel");
}

void launch_add_bias(float* y, const float* bias, int n, int width, cudaStream_t s) {
  const size_t total = static_cast<size_t>(n) * width;
  add_bias_kernel<<<blocks_for(total), kBlock, 0, s>>>(y, bias, total, width);
  VQ_CUDA_CHECK_LAUNCH("add_bias_kernel");
}

void launch_rope_rows(const RopeRows& r, cudaStream_t s) {
  rope_rows_kernel<<<dim3(r.n * r.batch, r.heads), 128, 0, s>>>(r);
  VQ_CUDA_CHECK_LAUNCH("rope_rows_kernel");
}

template <class T>
void launch_gated(bool gelu, const float* gate, const float* up, size_t n, T* out, cudaStream_t s) {
  gated_kernel<<<blocks_for(n), kBlock, 0, s>>>(gelu, gate, up, n, out);
  VQ_CUDA_CHECK_LAUNCH("gated_kernel");
}

void launch_softcap(float* x, size_t n, float cap, cudaStream_t s) {
  softcap_kernel<<<blocks_for(n), kBlock, 0, s>>>(x, n, cap);
  VQ_CUDA_CHECK_LAUNCH("softcap_kernel");
}

template <class T>
void launch_gemv(const T* w, int rows, int cols, const T* x, float* y, cudaStream_t s) {
  const int chunks = cols * static_cast<int>(sizeof(T)) / 16;
  gemv_kernel<T><<<(rows + kGemvWarps - 1) / kGemvWarps, kGemvWarps * 32, 0, s>>>(w, rows, chunks, x, y);
  VQ_CUDA_CHECK_LAUNCH("gemv_kernel");
}

void launch_add(float* x, const float* y, size_t n, cudaStream_t s) {
  add_kernel<<<blocks_for(n), kBlock, 0, s>>>(x, y, n);
  VQ_CUDA_CHECK_LAUNCH("add_kernel");
}

void launch_to_half(const float* x, size_t n, __half* y, cudaStream_t s) {
  to_half_kernel<<<blocks_for(n), kBlock, 0, s>>>(x, n, y);
  VQ_CUDA_CHECK_LAUNCH("to_half_kernel");
}

#define VQ_DECODER_PRECISION(T)                                                                        \
  template void launch_embed_rows<T>(const T*, const int32_t*, int, int, float, float*, cudaStream_t); \
  template void launch_rms_norm<T>(const float*, const float*, int, int, float, T*, cudaStream_t);     \
  template void launch_gated<T>(bool, const float*, const float*, size_t, T*, cudaStream_t);           \
  template void launch_gemv<T>(const T*, int, int, const T*, float*, cudaStream_t);
VQ_DECODER_PRECISION(__half)
VQ_DECODER_PRECISION(float)
#undef VQ_DECODER_PRECISION

}  // namespace veloxquant::cuda
