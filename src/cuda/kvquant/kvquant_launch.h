// KVQuant's kernels (kvquant_format.cu): per-token records of non-uniform level codes with a
// sparse part, keys stored before RoPE and turned to their positions as they are read.
#pragma once

#include <cuda_runtime.h>

#include "cuda/attention/launchers.h"

namespace veloxquant::cuda {

// One direction's tables and record layout (KvquantRecord's), as the kernels read them.
struct KvquantSide {
  const float* levels = nullptr;  // [kv_heads][2^bits]
  const float* lo = nullptr;      // keys: [kv_heads][head_dim] channel ranges; values: null
  const float* hi = nullptr;
  int bits = 0, outliers = 0, slots = 0;
  int codes_offset = 0;  // values: 4 (their fp16 range first); keys: 0
  __host__ __device__ int slots_offset(int dim) const { return codes_offset + (dim * bits + 7) / 8; }
  __host__ __device__ int record(int dim) const { return slots_offset(dim) + 4 * slots; }
};

struct KvquantArgs {  // AttendParams::format of the attention kernel
  KvquantSide keys, values;
  const double* inv_freq = nullptr;  // the keys' RoPE frequencies, rope_half of them; 0: keys as stored
  int rope_half = 0;
  int stages = 2;  // record buffers per warp (kvquant_stages)
};

// Encodes p.n tokens of every stream, keys as given (before RoPE); the first append keeps each
// stream's first token in its state (StreamView::state) when the sides keep a sink.
void launch_kvquant_append(const AppendParams& p, int batch, const KvquantSide& keys,
                           const KvquantSide& values, cudaStream_t stream);
// The attention kernel for p's head_dim (p.format: KvquantArgs).
SplitKernel kvquant_split_kernel(const AttendParams& p);

}  // namespace veloxquant::cuda
