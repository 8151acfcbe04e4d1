// The fp16 cache's kernels: rows as they are, the like-for-like baseline (fp16_format.cu).
#pragma once

#include <cuda_runtime.h>

#include "cuda/attention/launchers.h"

namespace veloxquant::cuda {

SplitKernel fp16_split_kernel(const AttendParams& p);
void launch_fp16_append(const AppendParams& p, int batch, cudaStream_t stream);

}  // namespace veloxquant::cuda
