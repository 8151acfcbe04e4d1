// KIVI's kernels (kivi_format.cu): keys per channel in groups of tokens, values per token.
#pragma once

#include <cuda_runtime.h>

#include "cuda/attention/launchers.h"

namespace veloxquant::cuda {

struct KiviArgs {  // AttendParams::format of the KIVI kernels
  int group = 32;  // tokens per key block; min(group, head_dim) channels per value group
};

// The attention kernel for p's head_dim, query group and key group (p.format: KiviArgs).
SplitKernel kivi_split_kernel(const AttendParams& p, int bits);
void launch_kivi_append(const AppendParams& p, int batch, int bits, int group, cudaStream_t stream);

}  // namespace veloxquant::cuda
