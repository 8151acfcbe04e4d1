// OpenBLAS set up the way the weight products use it.
#pragma once

namespace veloxquant::runtime {

// Idempotent and thread-safe; call before any sgemm. Keeps every OpenBLAS call on its calling
// thread, and picks the AVX-512 / AVX2 kernels where OpenBLAS's CPU detection missed them.
void configure_blas();

}  // namespace veloxquant::runtime
