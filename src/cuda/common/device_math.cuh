// Device helpers the kernels share: asynchronous 16-byte copies into shared memory, warp
// reductions, and RoPE computed exactly as the CPU's apply_rope (core/rope.cpp).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace veloxquant::cuda {

inline constexpr int kWarp = 32;

// A 32-bit word, or an f32, at an address 4-byte aligned when WORDS, else only 2-byte aligned
// (records of an odd number of 16-bit units, such as TurboQuant's 34 bytes at head_dim 80 and 3
// bits), then as two 16-bit loads.
template <bool WORDS>
__device__ inline uint32_t load_u32(const uint8_t* p) {
  if constexpr (WORDS) return *reinterpret_cast<const uint32_t*>(p);
  const auto* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<uint32_t>(h[0]) | static_cast<uint32_t>(h[1]) << 16;
}
template <bool WORDS>
__device__ inline float load_f32(const uint8_t* p) {
  return __uint_as_float(load_u32<WORDS>(p));
}

// 16 bytes global -> shared without a register round trip (sm_80+). Both addresses 16-aligned.
__device__ inline void copy16_async(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem));
}
__device__ inline void async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int Pending>
__device__ inline void async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

// 4 bytes global -> shared, for records only 4-byte aligned.
__device__ inline void copy4_async(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(gmem));
}

// A warp copies `bytes` (a multiple of 4) from global to shared memory, 4 bytes per lane.
__device__ inline void warp_copy_words_async(void* smem, const void* gmem, int bytes, int lane) {
  auto* d = static_cast<uint8_t*>(smem);
  const auto* s = static_cast<const uint8_t*>(gmem);
  for (int o = lane * 4; o < bytes; o += kWarp * 4) copy4_async(d + o, s + o);
}

// A warp copies `bytes` (a multiple of 16) from global to shared memory, 16 bytes per lane.
__device__ inline void warp_copy_async(void* smem, const void* gmem, int bytes, int lane) {
  auto* d = static_cast<uint8_t*>(smem);
  const auto* s = static_cast<const uint8_t*>(gmem);
  for (int o = lane * 16; o < bytes; o += kWarp * 16) copy16_async(d + o, s + o);
}

__device__ inline float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ inline float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// 0..255 as a float without the quarter-rate integer conversion: 2^23 + c has c in its mantissa.
__device__ inline float small_code_to_float(unsigned c) {
  return __uint_as_float(0x4B000000u | c) - 8388608.0f;
}

// (x0, x1) rotated by the angle of cosine c and sine s, times magnitude m: products and sums in
// double, rounded once to float, as the CPU's apply_rope does (m is 1 but with YaRN, and
// multiplying by 1 is exact). The operations are spelled out (_rn intrinsics) so nvcc cannot
// contract them into fused multiply-adds, which the CPU build without FMA does not do either.
__device__ inline void rotate_pair(float& x0, float& x1, double c, double s, double m = 1.0) {
  const double a = x0, b = x1;
  x0 = static_cast<float>(__dmul_rn(__dsub_rn(__dmul_rn(a, c), __dmul_rn(b, s)), m));
  x1 = static_cast<float>(__dmul_rn(__dadd_rn(__dmul_rn(a, s), __dmul_rn(b, c)), m));
}

// One rotated pair of the CPU's apply_rope: the angle pos * inv_freq in double.
__device__ inline void rope_pair(float& x0, float& x1, double inv_freq, int64_t pos, double magnitude = 1.0) {
  double s, c;
  sincos(__dmul_rn(static_cast<double>(pos), inv_freq), &s, &c);
  rotate_pair(x0, x1, c, s, magnitude);
}

}  // namespace veloxquant::cuda
