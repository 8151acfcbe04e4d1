#include "core/blas.h"

#include <cblas.h>

#include <cstdlib>
#include <cstring>

// Exported by OpenBLAS builds with DYNAMIC_ARCH (Debian's) to choose the kernel set, reading
// OPENBLAS_CORETYPE; weak, so that a build without them still links and keeps its choice.
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));

namespace veloxquant {
namespace {

// The best OpenBLAS x86-64 kernel set this CPU can run, or nullptr.
const char* coretype_for_this_cpu() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return "Cooperlake";
  if (avx512) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return nullptr;
}

// OpenBLAS 0.3.21 knows CPU models by number; on a newer one (the development machines' Xeon,
// model 0xCF) it falls back to its SSE3 "Prescott" kernels, whose sgemm runs at a quarter of
// the AVX-512 kernels' speed (about 30 vs 117 GFLOP/s on one core, n = 128, 4096 x 4096). Then
// reselect by features, unless the user chose with OPENBLAS_CORETYPE. The variable is set only
// around the reselection, so child processes do not inherit it.
void fix_kernel_choice() {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || std::getenv("OPENBLAS_CORETYPE")) return;
  const char* current = openblas_get_corename();
  if (std::strcmp(current, "Prescott") != 0 && std::strcmp(current, "Unknown") != 0) return;
  const char* better = coretype_for_this_cpu();
  if (!better) return;
  setenv("OPENBLAS_CORETYPE", better, 0);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace

void configure_blas() {
  static const bool configured = [] {
    fix_kernel_choice();
    // Debian's libopenblas0-pthread would start its own threads inside ours: the products
    // parallelise over tiles of weight rows on the library's thread pool, each sgemm on its calling thread.
    openblas_set_num_threads(1);
    return true;
  }();
  (void)configured;
}

}  // namespace veloxquant
