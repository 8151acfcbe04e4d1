// TurboQuant-MSE quantize-on-append: one block per (appended token, sequence x KV head, stream),
// one thread per coordinate, one launch per layer step. Each step repeats the CPU codec's float
// operations in its order (turboquant/rotated_table_codec.cpp, core/rotation.cpp): the norm
// summed in double from coordinate 0 up; then signs, the Walsh-Hadamard butterflies stage by
// stage (in registers and warp shuffles while a pair sits inside one warp) and the 1/sqrt(d)
// scale, or at head_dim 80 and 96 the dense rotation's row c dotted with x from coordinate 0 up,
// a multiply and an add at a time; the 1/norm scale, then the count of codebook boundaries <= y;
// so the records match bytewise. turboquant_rvq takes the same steps up to its two stages' counts.
// turboquant_prod's keys (turboquant/turboquant_prod_codec.cpp) go on: the residual r = y - level
// (its squared norm summed in double like the norm), the sketch S r (a thread per row; its sum
// runs in another order than the CPU's SIMD dot, so a sign may differ where S r is within
// rounding of 0), then [f32 norm][f32 norm |r|][bits-1 bit codes][sign bits].
#include <cuda_fp16.h>

#include "cuda/common/appended_rows.cuh"
#include "cuda/common/check.cuh"
#include "cuda/common/device_math.cuh"
#include "cuda/common/rotation.cuh"
#include "cuda/turboquant/turboquant_launch.h"

namespace veloxquant::cuda {
namespace {

// Packs `count` codes of `bits` bits (code i at bits [i * bits, (i + 1) * bits), little-endian)
// into out; the block's threads take a byte each.
__device__ void pack_codes(uint8_t* out, const uint8_t* codes, int count, int bits, int thread, int threads) {
  for (int byte = thread; byte < count * bits / 8; byte += threads) {
    unsigned acc = 0;
    for (int b = 0; b < 8; ++b) {
      const int bit = byte * 8 + b;
      acc |= ((codes[bit / bits] >> (bit % bits)) & 1u) << b;
    }
    out[byte] = static_cast<uint8_t>(acc);
  }
}

// Thread 0's sum of squares[0..d) from index 0 up, in double (the CPU's order); all threads
// return it.
__device__ double ordered_sum(const double* squares, int d, double* result) {
  __syncthreads();
  if (threadIdx.x == 0) {
    double sum = 0;
    for (int i = 0; i < d; ++i) sum = __dadd_rn(sum, squares[i]);
    *result = sum;
  }
  __syncthreads();
  return *result;
}

// blockIdx.z + first_stream: 0 keys, 1 values.
__global__ void turboquant_append_kernel(AppendParams p, int bits, TurboQuantDevice tq, int first_stream) {
  extern __shared__ double squares[];  // head_dim doubles, then head_dim floats, head_dim codes, head_dim signs
  float* y = reinterpret_cast<float*>(squares + p.head_dim);
  auto* codes = reinterpret_cast<uint8_t*>(y + p.head_dim);
  uint8_t* signs = codes + p.head_dim;
  __shared__ double sum_s;
  const int d = p.head_dim, c = threadIdx.x, t = blockIdx.x, seq = blockIdx.y;
  const bool key = blockIdx.z + first_stream == 0, prod = key && tq.key_sketch != nullptr;
  const int code_bits = prod ? bits - 1 : bits;
  const StreamView& s = key ? p.keys : p.values;
  float v = appended_value(p, key ? p.k : p.v, key, seq, t, c);
  // The squares are exact in double, so only the sum's order matters.
  squares[c] = __dmul_rn(static_cast<double>(v), static_cast<double>(v));
  const float norm = static_cast<float>(sqrt(ordered_sum(squares, d, &sum_s)));
  if (norm != 0) {
    const float rotated = rotate_coordinate(v, c, d, key ? tq.key_signs : tq.value_signs,
                                            key ? tq.key_rotation : tq.value_rotation, tq.hadamard_scale, y);
    v = __fmul_rn(rotated, __fdiv_rn(1.0f, norm));
  } else {
    v = 0;
  }
  unsigned code = 0;
  if (tq.stage1_levels != nullptr) {
    // turboquant_rvq (turboquant_rvq_codec.cpp): u = sqrt(d) y by its Gaussian levels, the
    // residual by its Laplacian ones, both indices in one code.
    const int stage_bits = bits / 2, stage_bounds = (1 << stage_bits) - 1;
    const float u = __fmul_rn(tq.stage_scale, v);
    unsigned first = 0, second = 0;
    for (int i = 0; i < stage_bounds; ++i) first += tq.stage1_boundaries[i] <= u ? 1u : 0u;
    const float r = __fsub_rn(u, tq.stage1_levels[first]);
    for (int i = 0; i < stage_bounds; ++i) second += tq.stage2_boundaries[i] <= r ? 1u : 0u;
    code = first | second << stage_bits;
  } else {
    const float* bounds = key ? tq.key_boundaries : tq.value_boundaries;
    for (int i = 0; i < (1 << code_bits) - 1; ++i) code += bounds[i] <= v ? 1u : 0u;
  }
  codes[c] = static_cast<uint8_t>(code);
  float rho = 0;
  if (prod) {
    const float r = __fsub_rn(v, tq.key_levels[code]);
    squares[c] = __dmul_rn(static_cast<double>(r), static_cast<double>(r));
    y[c] = r;
    rho = __fmul_rn(norm, static_cast<float>(sqrt(ordered_sum(squares, d, &sum_s))));
    float sr = 0;  // (S r)_c: the threads of a step read a row of S^T, adjacent floats
    for (int i = 0; i < d; ++i) sr = fmaf(tq.key_sketch[i * d + c], y[i], sr);
    signs[c] = sr >= 0 ? 1 : 0;
  }
  __syncthreads();
  const int header = prod ? 8 : 4, code_bytes = d * code_bits / 8;
  const int record = header + code_bytes + (prod ? d / 8 : 0);
  uint8_t* out = s.codes + seq * s.stream_bytes + static_cast<size_t>(s.slot(p.old_tokens + t)) * record;
  // Records are 2-byte aligned at some sizes (34 bytes at head_dim 80 and 3 bits): bytewise.
  if (c == 0) memcpy(out, &norm, sizeof(norm));
  if (c == 0 && prod) memcpy(out + 4, &rho, sizeof(rho));
  pack_codes(out + header, codes, d, code_bits, c, d);
  if (prod) pack_codes(out + header + code_bytes, signs, d, 1, c, d);
}

}  // namespace

void launch_turboquant_append(const AppendParams& p, int batch, int bits, const TurboQuantDevice& t,
                              cudaStream_t stream, bool values_only) {
  const size_t bytes = p.head_dim * (sizeof(double) + sizeof(float) + 2);
  const int first = values_only ? 1 : 0;
  turboquant_append_kernel<<<dim3(p.n, batch * p.kv_heads, 2 - first), p.head_dim, bytes, stream>>>(p, bits,
                                                                                                    t, first);
  VQ_CUDA_CHECK_LAUNCH("turboquant_append_kernel");
}

}  // namespace veloxquant::cuda
