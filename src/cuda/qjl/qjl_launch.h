// QJL's kernels (qjl_format.cu): keys as the signs of a Gaussian sketch plus norms, values as
// KIVI's per-token codes.
#pragma once

#include <cuda_runtime.h>

#include "cuda/attention/launchers.h"

namespace veloxquant::cuda {

struct QjlArgs {  // AttendParams::format of the QJL kernels (qjl/qjl_layout.cuh)
  const float* sketch_t = nullptr;         // S^T: head_dim x proj, row-major (row c: column c of S)
  const uint16_t* sketch_t_f16 = nullptr;  // the same in fp16, each 32 rows as pairs (j, j + 16)
  int group = 32, outliers = 8;            // tokens per key block, outlier channels per block
  int value_group = 32;                    // channels per value group
  // sqrt(channels) * sqrt(pi/2) / sketch bits of the inlier and outlier parts: times a stored RMS,
  // the weight of a token's sign sum in the estimator (the CPU codec's float expression).
  float inlier_scale = 0, outlier_scale = 0;
};

// The attention kernel for p's head_dim and value group (p.format: QjlArgs); vbits 2 or 4.
SplitKernel qjl_split_kernel(const AttendParams& p, int vbits);

struct QjlDevice {  // device copies of QjlTables and the sizes of QJL's key blocks
  const float* sketch_t;  // S^T: head_dim x proj, row-major
  int group, outliers, value_group;
};
// vbits: the value bits (2 or 4).
void launch_qjl_append(const AppendParams& p, int batch, int vbits, const QjlDevice& q, cudaStream_t stream);

}  // namespace veloxquant::cuda
