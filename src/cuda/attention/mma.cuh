// Tensor-core building blocks of the decode kernels: the m16n8k16 fp16 MMA (f32 accumulate),
// ldmatrix, and small unsigned codes read as fp16 pairs with two integer instructions.
//
// Fragment layout (PTX ISA, mma.m16n8k16 .f16): a lane is (g, t) = (lane / 4, lane % 4).
//   A (16 x 16, rows m, columns k): a[0] = (m g, k 2t..2t+1), a[1] = (m g+8, k 2t..2t+1),
//                                   a[2] = (m g, k 2t+8..2t+9), a[3] = (m g+8, k 2t+8..2t+9)
//   B (16 x 8, rows k, columns n):  b[0] = (k 2t..2t+1, n g), b[1] = (k 2t+8..2t+9, n g)
//   C (16 x 8):                     c[0..1] = (m g, n 2t..2t+1), c[2..3] = (m g+8, n 2t..2t+1)
// The decode kernels put tokens or channels on m and the query heads of a KV head's group on n,
// so every head of a group of up to 8 shares one MMA. The k index is a sum index: a kernel may
// map it to channels (or tokens) in any order as long as A and B agree, which lets each lane take
// the codes that sit next to each other in the CPU codecs' byte layouts.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace veloxquant::cuda {

struct MmaLane {
  int g, t;
  __device__ explicit MmaLane(int lane) : g(lane / 4), t(lane % 4) {}
};

// c += a * b. Not volatile: it reads registers only, so the compiler may interleave independent
// MMAs with other work (the latency of one is tens of cycles).
__device__ inline void mma_16816(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Four 8x8 fp16 matrices from shared memory; lane i gives the address of row i % 8 of matrix i / 8.
__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
// The same, each matrix transposed.
__device__ inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

__device__ inline uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// Elementwise fp16 product of two packed pairs.
__device__ inline uint32_t mul_half2(uint32_t a, uint32_t b) {
  const __half2 h = __hmul2(*reinterpret_cast<const __half2*>(&a), *reinterpret_cast<const __half2*>(&b));
  return *reinterpret_cast<const uint32_t*>(&h);
}

// From two packed pairs (x0, x1) and (x2, x3): (x0, x2), and with odd = true (x1, x3).
__device__ inline uint32_t interleave_half2(uint32_t lo, uint32_t hi, bool odd) {
  return __byte_perm(lo, hi, odd ? 0x7632 : 0x5410);
}

// The codes of bits 0..BITS-1 of bytes 0 and 2 of (word >> shift) as an fp16 pair (low half:
// byte 0's code, high half: byte 2's), each code c read as the subnormal c * 2^-24: one shift and
// one mask, no conversion. Products with normal fp16 operands are exact in the MMA's f32
// accumulator, so a sum of them times kSubnormalCodeScale is the sum over the codes themselves.
inline constexpr float kSubnormalCodeScale = 16777216.0f;  // 2^24
template <int BITS>
__device__ inline uint32_t codes_as_subnormal_half2(uint32_t word, int shift) {
  return (word >> shift) & (((1u << BITS) - 1u) * 0x00010001u);
}

}  // namespace veloxquant::cuda
