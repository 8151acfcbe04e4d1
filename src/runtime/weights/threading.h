// When the weight products go multithreaded. Handing a loop to the thread pool costs a few
// microseconds; below the threshold one core is done sooner (stories260K's matvecs, 512 x 64 at
// most, stay on the calling thread). At 2^18 multiply-adds (about 18 us on one core) two threads
// took the median matvec time 1.6x lower on the 2-core development machine, at 2^16 not at all.
#pragma once

#include <cstddef>

#include "core/parallel.h"

namespace veloxquant::runtime {

// Multiply-adds (tokens * rows * cols) of one product on the row kernels.
inline constexpr size_t kParallelMacs = size_t{1} << 18;
// The same for sgemm, whose split into row tiles repacks X once per tile: at 64 x 64 x 128
// tokens (2^19, 17 us on one core) two threads were slower; at 512 x 512 x 128 1.6-1.9x faster.
inline constexpr size_t kParallelSgemmMacs = size_t{1} << 22;

// The threads to use for `work` units given the threshold: 1 below it, inside a parallel loop,
// or when the pool's thread count is 1.
inline int threads_for(size_t work, size_t threshold) {
  if (work < threshold || in_parallel_for()) return 1;
  return threads();
}

}  // namespace veloxquant::runtime
