// RoPE over a run of consecutive positions, for caches that rotate stored keys when they read
// them (KVCache with MethodInfo::keys_before_rope): the rotation of apply_rope without a cosine
// and a sine per coordinate pair and vector.
#pragma once

#include <cstddef>
#include <cstdint>

#include "veloxquant/rope.h"

namespace veloxquant {

// inv_freq[i] = rope_inverse_frequency(rope, i) for i < dims / 2: the angle pair i turns by per
// position. REQUIRES: room for dims / 2 values.
void rope_inverse_frequencies(const RopeParams& rope, double* inv_freq);

// Rotates n vectors of head_dim floats (contiguous) in place, vector j to position first + j, as
// apply_rope(rope, x + j * head_dim, 1, head_dim, first + j) does (to float rounding). The angles
// advance by the angle-addition recurrence in double, re-seeded from cos and sin every 256
// positions so that rounding cannot build up. Throws Error as apply_rope does for bad dims.
void apply_rope_run(const RopeParams& rope, float* x, size_t n, size_t head_dim, int64_t first);

}  // namespace veloxquant
