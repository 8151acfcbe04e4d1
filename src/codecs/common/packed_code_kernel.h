// Scoring queries against, and accumulating weighted sums of, vectors stored as bit-packed
// per-coordinate codes into one small table of values: x_t[c] = scale_t * table[code_t[c]].
// This is the hot loop of every TurboQuant codec and of RaBitQ's keys; the rotation stays outside
// (the caller rotates queries once per call and inverse-rotates accumulated sums once per call).
//
// Speed comes from visiting coordinates in "kernel order" rather than natural order: one SIMD
// load of N code bytes expands to 8/bits vectors of N codes by shift-and-mask, with no lane
// shuffles, and the queries and accumulators are laid out to match. Codes of 3, 5, 6 or 7 bits
// keep natural order: a byte shuffle and a per-lane shift extract N codes per load. Every width
// is read straight from the records in the pack_bits layout (on vectors of fewer than 8 lanes,
// odd widths are unpacked to bytes first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace veloxquant {

// Where things sit inside the fixed-size record of one token.
struct RecordFormat {
  size_t stride = 0;        // bytes per token
  size_t scale_offset = 0;  // f32 multiplier of the token (its norm)
  size_t code_offset = 0;   // packed codes, pack_bits layout
};

class PackedCodeKernel;

// The QJL half of a turboquant_prod record, scored in the same pass as its MSE codes:
// factor * rho_t * sum_c (S q)_i[c] * (+1 or -1 by sign bit c). With z in {0, 1} that is
// factor * rho_t * (sum_c 2 (S q)_i[c] z_c - totals_i), so each set bit costs one masked FMA.
// The sign bits are read in natural order, a lane mask straight from the packed bytes.
struct SignTerm {
  const PackedCodeKernel* kernel;  // 1-bit kernel over the sign bits: sizes and bounds
  const float* twice_sketch;       // 2 (S q)_i in natural order, zero-padded to
                                   // kernel->positions(): [nq, kernel->positions()]
  const float* totals;             // sum_c (S q)_i[c], per query
  RecordFormat format;             // scale: rho; codes: the sign bits
  float factor;
};

class PackedCodeKernel {
 public:
  // REQUIRES: dim >= 1, 1 <= bits <= 8, table.size() == 2^bits, finite entries.
  PackedCodeKernel(size_t dim, unsigned bits, std::vector<float> table);

  size_t dim() const { return dim_; }
  // Length of a vector in kernel order (dim plus zero padding to whole SIMD tiles).
  size_t positions() const { return positions_; }

  // xk = x in kernel order, zero in the padding. xk has positions() floats.
  void to_kernel_order(const float* x, float* xk) const;
  // x[c] += xk at c's position, for the dim real coordinates.
  void add_natural_order(const float* xk, float* x) const;

  // scores[i * n + t] = factor * scale_t * sum_c qk_i[c] * table[code_t[c]], for nq queries
  // given in kernel order (qk: [nq, positions()]) and n records. With signs, each score also
  // gets the sign term of its record, summed in the same per-token reduction.
  void dot(const float* qk, size_t nq, const uint8_t* records, size_t n, const RecordFormat& f, float factor,
           float* scores, const SignTerm* signs = nullptr) const;
  // acck[i * positions() + p] += factor * sum_t w[i * n + t] * scale_t * table[code_t[p]], the
  // weighted sum of the records in kernel order.
  void accumulate(const float* w, size_t nq, const uint8_t* records, size_t n, const RecordFormat& f,
                  float factor, float* acck) const;

 private:
  struct Block;
  Block view_block(const uint8_t* records, size_t n, size_t t0, size_t m, const RecordFormat& f,
                   std::vector<uint8_t>& scratch) const;

  size_t dim_;
  unsigned bits_;
  bool unpack_;           // rows unpacked to one byte per code before the SIMD loop
  unsigned layout_bits_;  // code width the SIMD loop reads: bits, or 8 when unpacked
  size_t vectors_;        // SIMD vectors per record, a multiple of the accumulate tile
  size_t span_;           // bytes of codes one record's loop reads (past the codes: padding)
  size_t positions_;
  std::vector<float> table_;           // padded to at least one SIMD vector
  std::vector<uint32_t> position_of_;  // natural coordinate -> kernel position
};

}  // namespace veloxquant
