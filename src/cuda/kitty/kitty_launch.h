// KITTY's kernels (kitty_format.cu): keys per channel in blocks with the widest channels boosted,
// values as KIVI's per-token codes.
#pragma once

#include <cuda_runtime.h>

#include "cuda/attention/launchers.h"

namespace veloxquant::cuda {

struct KittyArgs {              // AttendParams::format of the KITTY kernels, and the append's settings
  int group = 32;               // tokens per key block; min(group, head_dim) channels per value group
  int bits = 2, high_bits = 4;  // key bits of the other and of the boosted channels
  int boosted = 16;             // boosted channels per block
};

// The attention kernel for p's head_dim and value bits (2 or 4; p.format: KittyArgs).
SplitKernel kitty_split_kernel(const AttendParams& p, int vbits);
void launch_kitty_append(const AppendParams& p, int batch, int vbits, const KittyArgs& a,
                         cudaStream_t stream);

}  // namespace veloxquant::cuda
