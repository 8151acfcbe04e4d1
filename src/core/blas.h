// OpenBLAS set up the way the library uses it (weight products, prefill attention).
#pragma once

namespace veloxquant {

// Idempotent and thread-safe; call before any sgemm. Keeps every OpenBLAS call on its calling
// thread, and picks the AVX-512 / AVX2 kernels where OpenBLAS's CPU detection missed them.
void configure_blas();

}  // namespace veloxquant
