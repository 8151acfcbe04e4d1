// When the weight products go multithreaded. Starting and joining an OpenMP region costs a few
// microseconds; below the threshold one core is done sooner (stories260K's matvecs, 512 x 64 at
// most, stay on the calling thread). At 2^18 multiply-adds (about 18 us on one core) two threads
// took the median matvec time 1.6x lower on the 2-core development machine, at 2^16 not at all.
#pragma once

#include <omp.h>

#include <cstddef>

namespace veloxquant::runtime {

// Multiply-adds (tokens * rows * cols) of one product on the row kernels.
inline constexpr size_t kParallelMacs = size_t{1} << 18;
// The same for sgemm, whose split into row tiles repacks X once per tile: at 64 x 64 x 128
// tokens (2^19, 17 us on one core) two threads were slower; at 512 x 512 x 128 1.6-1.9x faster.
inline constexpr size_t kParallelSgemmMacs = size_t{1} << 22;

// The OpenMP threads to use for `work` units given the threshold: 1 below it, inside a parallel
// region, or when the global thread count is 1.
inline int threads_for(size_t work, size_t threshold) {
  if (work < threshold || omp_in_parallel()) return 1;
  return omp_get_max_threads();
}

}  // namespace veloxquant::runtime
