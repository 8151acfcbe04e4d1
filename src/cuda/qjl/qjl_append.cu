// QJL quantize-on-append, one launch per layer step: block (s, 0) per (sequence, KV head) s
// encodes the key groups that hold rows cached before this append (read from the ring), the KIVI
// value quads that leave the window (kivi_encode.cuh) and then writes the rows that stay into the
// rings; blocks (s, 1..) encode one key group each made only of appended rows, so a long prefill
// runs its groups in parallel and no block reads a ring row another block writes. One thread per
// channel. A key group repeats the CPU codec's operations in its order (qjl/qjl_key_codec.cpp):
//  - each channel's energy over the group summed in double from token 0 up; a channel is an
//    outlier when fewer than `outliers` channels have more energy (ties: the lower index wins, as
//    the CPU's sort), written ascending into the block header;
//  - each token's inlier and outlier norms summed in double from channel 0 up, stored as fp16 RMS;
//  - sketch products (S k)_i summed from channel 0 up, each product rounded before the add (the
//    CPU build's unfused axpy), one thread per sketch row, the signs gathered by warp ballots.
#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/qjl/qjl_launch.h"
#include "cuda/common/check.cuh"
#include "cuda/kivi/kivi_encode.cuh"
#include "cuda/qjl/qjl_layout.cuh"

namespace veloxquant::cuda {
namespace {

constexpr int kTokensPerPass = 32;  // sketch accumulators per thread and part

// Shared memory of a key group: its rows [group][d] floats, the channels' energies [d] doubles
// and outlier flags [d] bytes.
size_t key_group_bytes(int d, int group) { return static_cast<size_t>(group) * d * 4 + d * 9; }

// Little-endian stores at any byte: records start at odd bytes when the block's outlier count is
// odd. Each byte is picked by a byte permute: a byte store straight from the register that a
// float-to-half conversion wrote was seen to store the half's value as an integer (1 for 1.06)
// instead of its low byte (CUDA 13, sm_90).
__device__ void store_bytes(uint8_t* at, uint32_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    at[i] = static_cast<uint8_t>(__byte_perm(value, 0, 0x4440u | static_cast<unsigned>(i)));
}

__device__ void store_rms(uint8_t* at, double sum_sq, int channels) {
  const float rms = static_cast<float>(sqrt(__ddiv_rn(sum_sq, static_cast<double>(channels))));
  store_bytes(at, __half_as_ushort(__float2half_rn(rms)), 2);
}

// Key group [g0, g0 + group) of stream seq. Ends with the block synchronized.
__device__ void encode_key_group(const AppendParams& p, const QjlDevice& q, int g0, uint8_t* smem) {
  const int d = p.head_dim, c = threadIdx.x, seq = blockIdx.x, G = q.group;
  float* x = reinterpret_cast<float*>(smem);                 // [G][d]
  double* energy = reinterpret_cast<double*>(x + G * d);     // [d]
  uint8_t* outlier = reinterpret_cast<uint8_t*>(energy + d); // [d]
  double e = 0;
  for (int t = 0; t < G; ++t) {
    const float v = kivi::stream_value(p, p.keys, p.k, true, seq, g0 + t, c);
    x[t * d + c] = v;
    e = __dadd_rn(e, __dmul_rn(static_cast<double>(v), static_cast<double>(v)));
  }
  energy[c] = e;
  __syncthreads();
  int above = 0;
  for (int j = 0; j < d; ++j) above += energy[j] > e || (energy[j] == e && j < c);
  outlier[c] = above < q.outliers;
  __syncthreads();
  const qjl::KeyLayout kl{q.outliers, G};
  uint8_t* block = p.keys.codes + seq * p.keys.stream_bytes +
                   static_cast<size_t>(p.keys.slot(g0) / G) * kl.block_bytes();
  if (outlier[c]) {
    int slot = 0;
    for (int j = 0; j < c; ++j) slot += outlier[j];
    block[slot] = static_cast<uint8_t>(c);
  }
  uint8_t* records = block + q.outliers;
  for (int t = c; t < G; t += d) {
    double in = 0, out = 0;
    for (int j = 0; j < d; ++j) {
      const double sq = __dmul_rn(static_cast<double>(x[t * d + j]), static_cast<double>(x[t * d + j]));
      if (outlier[j]) out = __dadd_rn(out, sq);
      else in = __dadd_rn(in, sq);
    }
    store_rms(records + t * qjl::kTokenBytes + qjl::kNormsAt, in, d - q.outliers);
    store_rms(records + t * qjl::kTokenBytes + qjl::kNormsAt + 2, out, q.outliers);
  }
  // Sketch rows i = c, c + rows, ... over the block's whole warps (head_dim 80 leaves half a warp
  // out): the warp's 32 rows of one pass make one word of signs.
  const int lane = c % kWarp, rows = d / kWarp * kWarp;
  for (int i = c < rows ? c : qjl::kProj; i < qjl::kProj; i += rows) {
    const bool has_outlier_row = i - lane < qjl::kOutlierProj;  // the same for the whole warp
    for (int t0 = 0; t0 < G; t0 += kTokensPerPass) {
      float in[kTokensPerPass] = {}, out[kTokensPerPass] = {};
      for (int j = 0; j < d; ++j) {
        const float s = q.sketch_t[j * qjl::kProj + i];
        const float* xj = x + t0 * d + j;
        if (outlier[j]) {
          if (has_outlier_row) {
#pragma unroll
            for (int t = 0; t < kTokensPerPass; ++t) out[t] = __fadd_rn(out[t], __fmul_rn(xj[t * d], s));
          }
        } else {
#pragma unroll
          for (int t = 0; t < kTokensPerPass; ++t) in[t] = __fadd_rn(in[t], __fmul_rn(xj[t * d], s));
        }
      }
#pragma unroll
      for (int t = 0; t < kTokensPerPass; ++t) {
        uint8_t* rec = records + (t0 + t) * qjl::kTokenBytes;
        const unsigned in_bits = __ballot_sync(0xffffffffu, in[t] > 0);
        const unsigned out_bits = __ballot_sync(0xffffffffu, out[t] > 0);
        if (lane == 0) {
          store_bytes(rec + i / kWarp * 4, in_bits, 4);
          if (has_outlier_row) store_bytes(rec + qjl::kProj / 8 + i / kWarp * 4, out_bits, 4);
        }
      }
    }
  }
  __syncthreads();
}

// Key groups [first, last) in block (s, 0), then values and rings; in block (s, y) the y-th group
// from `fresh` on (kivi::KeyGroupPlan).
__global__ void qjl_append_kernel(AppendParams p, int vbits, QjlDevice q, int first, int last, int fresh) {
  extern __shared__ __align__(16) uint8_t smem[];
  if (blockIdx.y > 0) {
    encode_key_group(p, q, fresh + (blockIdx.y - 1) * q.group, smem);
    return;
  }
  for (int g0 = first; g0 < last; g0 += q.group) encode_key_group(p, q, g0, smem);
  const int total = p.old_tokens + p.n;
  kivi::encode_values(p, vbits, q.value_group, smem);
  kivi::write_ring_rows(p, p.keys, true, encoded_tokens(total, p.residual, q.group));
  kivi::write_ring_rows(p, p.values, false, encoded_tokens(total, p.residual, 4));
}

}  // namespace

void launch_qjl_append(const AppendParams& p, int batch, int vbits, const QjlDevice& q, cudaStream_t stream) {
  const kivi::KeyGroupPlan plan = kivi::KeyGroupPlan::of(p, q.group);
  const int value_groups = kivi::ValueLayout{p.head_dim, vbits, q.value_group}.groups();
  const size_t bytes = std::max(key_group_bytes(p.head_dim, q.group),
                                kivi::value_encode_bytes(p.head_dim, value_groups));
  VQ_CUDA_CHECK(cudaFuncSetAttribute(qjl_append_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(bytes)));
  qjl_append_kernel<<<dim3(batch * p.kv_heads, 1 + plan.fresh_groups), p.head_dim, bytes, stream>>>(
      p, vbits, q, plan.first, plan.last, plan.fresh);
  VQ_CUDA_CHECK_LAUNCH("qjl_append_kernel");
}

}  // namespace veloxquant::cuda
