// parallel_for over OpenMP that carries an exception out of the parallel region (an exception
// escaping an OpenMP region terminates the program) and rethrows the first one on the caller.
#pragma once

#include <cstddef>
#include <exception>
#include <mutex>

namespace veloxquant {

// `parallel` false runs the loop on the calling thread: for work smaller than the cost of waking
// the other threads (microseconds when they spin, far more when the machine is busy).
template <typename Fn>
void parallel_for(size_t n, Fn&& fn, bool parallel = true) {
  std::exception_ptr error;
  std::mutex m;
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (size_t i = 0; i < n; ++i) {
    try {
      fn(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(m);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace veloxquant
