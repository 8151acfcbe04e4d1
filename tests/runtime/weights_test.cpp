// Weight kernels: matvec, matmul and dequantize_row on every stored type against a scalar
// reference (veloxquant::dequantize, then double-precision dot products), across shapes that hit
// every tail and the threaded paths; the int8 activations of the quantized types and the integer
// kernels against the same sums in double; and WeightMatrix::from_gguf's checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/rng.h"
#include "runtime/gguf/block_codes.h"
#include "runtime/weights/activations.h"
#include "runtime/weights/int8_kernels.h"
#include "runtime/weights/weight_matrix.h"
#include "veloxquant/gguf.h"
#include "veloxquant/tensor.h"
#include "veloxquant/threads.h"

namespace veloxquant::runtime {
namespace {

constexpr GgmlType kTypes[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0,
    GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K,
    GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};

constexpr double kU = 0x1p-24;  // f32 unit roundoff

// For the plain float types every result is an f32 sum of f32 products of exactly representable
// weights, so its error against the exact dot product is below the classic bound for any
// summation order, gamma_n = n u / (1 - n u), times sum |w_j x_j|. We assert a quarter of it plus
// a few roundings, which holds for the blocked orders used here by a wide margin and still flags
// any wrong or missing term.
double error_bound(size_t cols, double abs_sum) {
  return (0.25 * static_cast<double>(cols) + 4.0) * kU * abs_sum;
}

bool quantized(GgmlType type) { return ggml_block_elements(type) > 1; }

std::vector<float> random_values(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// Byte offsets of the fp16 scales (d, and the min or dmin) inside one block of the types that
// have no quantizer here (ggml-common.h's layouts).
std::vector<size_t> scale_offsets(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: return {0, 2};
    case GgmlType::Q2_K: return {80, 82};
    case GgmlType::Q3_K: return {108};
    case GgmlType::Q6_K: return {208};
    default: return {0};  // Q5_0, IQ4_NL, IQ4_XS
  }
}

// Random codes and sub-block scales with finite fp16 scales of either sign: blocks as a
// quantizer could write them, some of every code value.
std::vector<uint8_t> random_blocks(GgmlType type, size_t elements, uint64_t seed) {
  Rng rng(seed);
  const size_t block = ggml_block_bytes(type);
  std::vector<uint8_t> out(elements / ggml_block_elements(type) * block);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng.next_u64());
  for (size_t at = 0; at < out.size(); at += block) {
    for (size_t offset : scale_offsets(type)) {
      const uint16_t h = f32_to_f16(static_cast<float>(0.01 * rng.normal()));
      std::memcpy(&out[at + offset], &h, 2);
    }
  }
  return out;
}

std::vector<uint8_t> encode(GgmlType type, const std::vector<float>& v) {
  std::vector<uint8_t> out;
  auto put16 = [&](auto convert) {
    out.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t h = convert(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  };
  switch (type) {
    case GgmlType::F32:
      out.resize(v.size() * 4);
      std::memcpy(out.data(), v.data(), out.size());
      break;
    case GgmlType::F16: put16([](float x) { return f32_to_f16(x); }); break;
    case GgmlType::BF16: put16([](float x) { return f32_to_bf16(x); }); break;
    case GgmlType::Q8_0: out = quantize_q8_0(v); break;
    default: out = quantize_q4_0(v); break;
  }
  return out;
}

// n random weights stored as `type`: quantized from normal values where the library has the
// quantizer, random blocks otherwise.
std::vector<uint8_t> random_weights(GgmlType type, size_t n, uint64_t seed) {
  if (type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16 ||
      type == GgmlType::Q8_0 || type == GgmlType::Q4_0)
    return encode(type, random_values(n, seed));
  return random_blocks(type, n, seed);
}

// A random matrix stored as `type`, its dequantized values, and a view over its bytes.
struct Matrix {
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // rows x cols, what veloxquant::dequantize decodes
  WeightMatrix w;

  Matrix(GgmlType type, size_t rows, size_t cols, uint64_t seed)
      : bytes(random_weights(type, rows * cols, seed)), values(rows * cols) {
    dequantize(type, bytes, values);
    w = WeightMatrix::view("w", type, rows, cols, bytes);
  }
};

struct Reference {
  double value;
  double abs_sum;           // sum |w_j x_j|
  double offset_terms = 0;  // integer_reference: sum over groups of |offset_g * scaled sum_g|
};

Reference reference_dot(const float* w, const float* x, size_t cols) {
  Reference r{0, 0};
  for (size_t j = 0; j < cols; ++j) {
    const double p = static_cast<double>(w[j]) * x[j];
    r.value += p;
    r.abs_sum += std::fabs(p);
  }
  return r;
}

// What the integer kernels compute for one row and token, in double, from the same activation
// codes: per group g, d_g * scale_g * sum (code - c) q + offset_g * (d_g sum q as stored)
// (block_codes.h, activations.h). `abs_sum` bounds every partial sum the kernels form: the products of the
// codes taken one by one, and each group's offset term.
Reference integer_reference(GgmlType type, const uint8_t* row, size_t cols,
                            const QuantizedActivations& a, size_t t) {
  Reference r{0, 0};
  const int8_t* q = a.codes_of(t);
  const float* d = a.scale_of(t);
  const float* scaled_sum = a.scaled_sum_of(t);
  gguf::with_block_codes(type, [&](auto codes) {
    using C = decltype(codes);
    constexpr size_t kGroups = C::kElements / C::kGroup;
    uint8_t code[C::kElements];
    float scale[kGroups], offset[kGroups] = {};
    for (size_t b = 0; b < cols / C::kElements; ++b) {
      C::unpack(row + b * C::kBytes, code, scale, offset);
      for (size_t g = 0; g < kGroups; ++g) {
        const size_t at = b * C::kElements + g * C::kGroup;
        double dot = 0, abs_dot = 0;
        for (size_t k = 0; k < C::kGroup; ++k) {
          const double p = static_cast<double>(static_cast<int>(code[g * C::kGroup + k]) - C::kCodeOffset) * q[at + k];
          dot += p;
          abs_dot += std::fabs(p);
        }
        const double dg = d[at / C::kGroup], offset_term = offset[g] * scaled_sum[at / C::kGroup];
        r.value += dg * scale[g] * dot + offset_term;
        r.abs_sum += dg * std::fabs(scale[g]) * abs_dot + std::fabs(offset_term);
        r.offset_terms += std::fabs(offset_term);
      }
    }
  });
  return r;
}

// Asserts y[t * rows + i] matches row i . x_t for every token t; returns the worst error as a
// fraction of its bound. Plain types: against the dequantized weights within error_bound.
// Quantized types, twice:
// - against integer_reference, within (2 cols / group + 10) u abs_sum: each term is rounded at
//   most twice before it joins an f32 sum of at most 2 cols / group terms per lane (a scale and
//   an offset term per group), and the lanes are added in a tree of depth at most 5;
// - against the dequantized weights and the unrounded x, adding what rounding x costs: each
//   |x - d q| is at most d / 2, plus 300 u d for the rounding of x / d and 127 * 2^-11 d where d
//   is kept in fp16, times |w|, and 2^-11 of each offset term where the scaled sums are kept in
//   fp16 (a derived bound, about 0.5 % of sum |w| max|x| for normal x, far below a wrong or
//   missing term).
double expect_close(const Matrix& m, const float* x, size_t n, const std::vector<float>& y,
                    const std::string& what) {
  const size_t cols = m.w.cols;
  const bool q8 = quantized(m.w.type);
  QuantizedActivations a;
  double worst = 0;
  auto check = [&](double got, double want, double bound, const std::string& where) {
    const double err = std::fabs(got - want);
    EXPECT_LE(err, bound) << what << where << ": " << got << " vs " << want;
    if (bound > 0) worst = std::max(worst, err / bound);
  };
  const kernels::QuantKernels* qk = kernels::quant_kernels(m.w.type);
  const size_t group = qk ? qk->group : 0;
  const bool half = qk && qk->rounding.half_scale;
  const double half_steps = 0.5 + 300 * kU + (half ? 127 * 0x1p-11 : 0.0);
  if (q8) quantize_activations(x, n, cols, group, qk->code_offset, qk->rounding, ActivationLayout::kRows, a);
  for (size_t t = 0; t < n; ++t) {
    for (size_t i = 0; i < m.w.rows; ++i) {
      const std::string where = " token " + std::to_string(t) + " row " + std::to_string(i);
      const float* w = &m.values[i * cols];
      const Reference exact = reference_dot(w, x + t * cols, cols);
      const double got = y[t * m.w.rows + i];
      if (!q8) {
        check(got, exact.value, error_bound(cols, exact.abs_sum), where);
        continue;
      }
      const Reference ints = integer_reference(m.w.type, m.bytes.data() + i * m.w.row_bytes(), cols, a, t);
      const size_t groups = cols / group;
      const double kernel_bound = (2.0 * static_cast<double>(groups) + 10) * kU * ints.abs_sum;
      check(got, ints.value, kernel_bound, where + " (integer reference)");
      double rounding = 0;
      for (size_t k = 0; k < cols; ++k) rounding += std::fabs(w[k]) * a.scale_of(t)[k / group];
      const double sums_rounding = half ? 0x1p-11 * ints.offset_terms : 0.0;
      check(got, exact.value, kernel_bound + half_steps * rounding + sums_rounding + 2 * kU * exact.abs_sum,
            where + " (exact)");
    }
  }
  return worst;
}

struct Shape {
  size_t rows, cols;
};

// Quantized types need cols % 32 == 0: 32 and 96 are not multiples of 4 vectors of 16 lanes, 64
// and 172 x 64 are stories260K's, 257 rows end in a partial group of 4, and 300 x 1024 is large
// enough to go multithreaded.
constexpr Shape kShapes[] = {{1, 32},  {3, 96},  {4, 64},    {5, 160},
                             {172, 64}, {64, 192}, {257, 128}, {300, 1024}};
// The plain types also take any cols: partial vectors at the end of a row.
constexpr Shape kPlainShapes[] = {{1, 1}, {7, 5}, {9, 40}, {64, 172}, {3, 1000}};
// Super-blocks of 256: one, two and three per row, 17 and 257 rows (a partial group of 4 and a
// partial panel of 16 rows), and the threaded 300 x 1024.
constexpr Shape kSuperBlockShapes[] = {{1, 256}, {3, 512}, {5, 768}, {17, 512}, {257, 256}, {300, 1024}};

std::vector<Shape> shapes_for(GgmlType type) {
  if (ggml_block_elements(type) == 256)
    return std::vector<Shape>(std::begin(kSuperBlockShapes), std::end(kSuperBlockShapes));
  std::vector<Shape> s(std::begin(kShapes), std::end(kShapes));
  if (ggml_block_elements(type) == 1) s.insert(s.end(), std::begin(kPlainShapes), std::end(kPlainShapes));
  return s;
}

std::string label(GgmlType type, Shape s) {
  return std::string(ggml_type_name(type)) + " " + std::to_string(s.rows) + "x" +
         std::to_string(s.cols);
}

// Runs fn with the pool's thread count set to `n`, then restores it.
template <class Fn>
void with_threads(int n, Fn&& fn) {
  const int saved = threads();
  set_threads(n);
  fn();
  set_threads(saved);
}

TEST(WeightMatvec, MatchesScalarReferenceForEveryTypeAndShape) {
  for (GgmlType type : kTypes) {
    double worst = 0;
    for (Shape s : shapes_for(type)) {
      const Matrix m(type, s.rows, s.cols, s.rows * 1000 + s.cols);
      const std::vector<float> x = random_values(s.cols, 7);
      std::vector<float> y(s.rows);
      matvec(m.w, x.data(), y.data());
      worst = std::max(worst, expect_close(m, x.data(), 1, y, label(type, s)));
    }
    RecordProperty(std::string("worst_error_fraction_") + ggml_type_name(type), std::to_string(worst));
  }
}

TEST(WeightMatmul, MatchesScalarReferenceForEveryTypeShapeAndTokenCount) {
  for (GgmlType type : kTypes) {
    double worst = 0;
    for (Shape s : shapes_for(type)) {
      const Matrix m(type, s.rows, s.cols, s.rows * 1000 + s.cols);
      // 1 to 9 tokens cover every token group of the row kernels; from 12 tokens on the quantized
      // types run tiles of 8 tokens on panels (12 and 13: a partial second tile); 17, 40 and 64
      // reach sgemm.
      for (size_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 17, 40, 64}) {
        const std::vector<float> x = random_values(n * s.cols, 11 + n);
        std::vector<float> y(n * s.rows);
        matmul(m.w, x.data(), n, y.data());
        worst = std::max(worst, expect_close(m, x.data(), n, y, label(type, s) + " n=" + std::to_string(n)));
      }
    }
    RecordProperty(std::string("worst_error_fraction_") + ggml_type_name(type), std::to_string(worst));
  }
}

TEST(WeightMatmul, FewTokensAreExactlyMatvecPerToken) {
  // Up to 11 tokens every type stays on the row kernels, whose sums do not depend on how many
  // tokens share a pass: each output row is bit for bit the matvec of its token.
  for (GgmlType type : kTypes) {
    for (Shape s : shapes_for(type)) {
      const Matrix m(type, s.rows, s.cols, 5);
      for (size_t n : {1, 3, 6, 11}) {
        const std::vector<float> x = random_values(n * s.cols, 6);
        std::vector<float> a(n * s.rows), b(n * s.rows);
        for (size_t t = 0; t < n; ++t) matvec(m.w, &x[t * s.cols], &a[t * s.rows]);
        matmul(m.w, x.data(), n, b.data());
        EXPECT_EQ(a, b) << label(type, s) << " n=" << n;
      }
    }
  }
}

TEST(WeightMatmul, PanelResultsDoNotDependOnTheTokenCount) {
  // From 12 tokens on the quantized types run tiles of 8 tokens over transposed panels; a token's
  // sums take the same steps in whichever tile it falls, so 13 tokens give the first 13 rows of 20.
  for (GgmlType type : kTypes) {
    if (!quantized(type)) continue;
    const Shape s = shapes_for(type).back();
    const Matrix m(type, s.rows, s.cols, 8);
    const std::vector<float> x = random_values(20 * s.cols, 4);
    std::vector<float> thirteen(13 * s.rows), twenty(20 * s.rows);
    matmul(m.w, x.data(), 13, thirteen.data());
    matmul(m.w, x.data(), 20, twenty.data());
    twenty.resize(thirteen.size());
    EXPECT_EQ(thirteen, twenty) << label(type, s);
  }
}

TEST(WeightMatmul, NonFiniteActivationsGiveNaNAsInF32) {
  // A NaN or infinity in a token has no int8 code: every output of that token is NaN, as an f32
  // product gives, and the other tokens are unchanged. Token counts reach the row and panel kernels.
  for (GgmlType type : kTypes) {
    if (!quantized(type)) continue;
    const Shape s = shapes_for(type)[1];
    const Matrix m(type, s.rows, s.cols, 3);
    for (size_t n : {1, 3, 13}) {
      const std::vector<float> clean = random_values(n * s.cols, 9);
      std::vector<float> x = clean, want(n * s.rows), got(n * s.rows);
      x[(n - 1) * s.cols + 5] = n % 2 ? std::numeric_limits<float>::quiet_NaN()
                                      : std::numeric_limits<float>::infinity();
      matmul(m.w, clean.data(), n, want.data());
      matmul(m.w, x.data(), n, got.data());
      for (size_t i = 0; i < n * s.rows; ++i) {
        if (i / s.rows == n - 1) EXPECT_TRUE(std::isnan(got[i])) << label(type, s) << " n=" << n << " i " << i;
        else EXPECT_EQ(got[i], want[i]) << label(type, s) << " n=" << n << " i " << i;
      }
    }
  }
}

TEST(WeightActivations, RoundEveryValueAsLlamaCppDoes) {
  // 3 tokens (padded to 8) of 512 values, one 32-value block all zeros, magnitudes that differ by
  // 10^4 from block to block; both layouts, both of llama.cpp's roundings, both group sizes.
  constexpr size_t kTokens = 3, kCols = 512;
  std::vector<float> x = random_values(kTokens * kCols, 21);
  for (size_t k = 0; k < x.size(); ++k) x[k] *= std::pow(10.0f, static_cast<float>(k / 32 % 5) - 2);
  std::fill(x.begin() + 32, x.begin() + 64, 0.0f);
  for (ActivationLayout layout : {ActivationLayout::kRows, ActivationLayout::kTiles}) {
    for (ActivationRounding rounding : {kQ8Blocks, kQ8KBlocks}) {
      for (size_t group : {16, 32}) {
        for (int c : {0, 8, 128}) {
          QuantizedActivations a;
          quantize_activations(x.data(), kTokens, kCols, group, c, rounding, layout, a);
          ASSERT_EQ(a.tokens, 8u);
          ASSERT_EQ(a.stride, 512u);
          for (size_t t = 0; t < a.tokens; ++t) {
            const std::string where = "layout " + std::to_string(static_cast<int>(layout)) + " block " +
                                      std::to_string(rounding.block) + " group " + std::to_string(group) +
                                      " c " + std::to_string(c) + " t " + std::to_string(t);
            for (size_t g = 0; g < a.groups(); ++g) {
              // The block's max |x|, and its scale as llama.cpp computes it (quantize_row_q8_0 /
              // quantize_row_q8_K): max / 127 in fp16, or 1 / (127 / max) in f32.
              float amax = 0;
              const size_t first = g * group / rounding.block * rounding.block;
              for (size_t k = first; k < first + rounding.block; ++k)
                amax = std::max(amax, t < kTokens ? std::fabs(x[t * kCols + k]) : 0.0f);
              const float inv = amax == 0 ? 0.0f : 127.0f / amax;
              const float d = rounding.half_scale ? f16_to_f32(f32_to_f16(amax / 127.0f))
                                                  : (inv == 0 ? 0.0f : 1.0f / inv);
              EXPECT_EQ(a.scale[a.group_index(t, g)], d) << where << " g " << g;
              int sum = 0;
              for (size_t k = g * group; k < (g + 1) * group; ++k) {
                const float v = t < kTokens ? x[t * kCols + k] : 0.0f;
                const int q = a.codes[a.code_index(t, k)];
                EXPECT_EQ(q, static_cast<int>(std::nearbyint(v * inv))) << where << " k " << k;
                ASSERT_LE(std::abs(q), 127);
                sum += q;
              }
              const float scaled = (rounding.half_scale ? amax / 127.0f : d) * static_cast<float>(sum);
              EXPECT_EQ(a.scaled_sum[a.group_index(t, g)],
                        rounding.half_scale ? f16_to_f32(f32_to_f16(scaled)) : scaled)
                  << where;
              EXPECT_EQ(a.group_start[a.group_index(t, g)], -c * sum) << where;
            }
            if (layout != ActivationLayout::kRows) continue;
            for (size_t j = 0; j < a.stride / 4; ++j) {
              const int8_t* q = a.codes_of(t) + 4 * j;
              EXPECT_EQ(a.quad_start_of(t)[j], -c * (q[0] + q[1] + q[2] + q[3])) << where;
            }
          }
        }
      }
    }
  }
}

TEST(WeightThreads, MultithreadedEqualsSingleThreaded) {
  for (GgmlType type : kTypes) {
    // Large enough for both products to split across threads.
    for (Shape s : {Shape{300, 1024}, Shape{1030, 256}}) {
      const Matrix m(type, s.rows, s.cols, 9);
      for (size_t n : {1, 5, 64}) {
        const std::vector<float> x = random_values(n * s.cols, 10);
        std::vector<float> one(n * s.rows), two(n * s.rows);
        with_threads(1, [&] { matmul(m.w, x.data(), n, one.data()); });
        with_threads(2, [&] { matmul(m.w, x.data(), n, two.data()); });
        EXPECT_EQ(one, two) << label(type, s) << " n=" << n;
      }
    }
  }
}

TEST(WeightDequantizeRow, EqualsDequantizeOfTheRow) {
  for (GgmlType type : kTypes) {
    for (Shape s : shapes_for(type)) {
      const Matrix m(type, s.rows, s.cols, 3);
      std::vector<float> row(s.cols);
      for (size_t r : {size_t{0}, s.rows / 2, s.rows - 1}) {
        dequantize_row(m.w, r, row.data());
        EXPECT_EQ(0, std::memcmp(row.data(), &m.values[r * s.cols], s.cols * sizeof(float)))
            << label(type, s) << " row " << r;
      }
    }
  }
  const Matrix m(GgmlType::Q8_0, 2, 32, 1);
  std::vector<float> row(32);
  EXPECT_THROW(dequantize_row(m.w, 2, row.data()), ShapeError);
}

// ---- from_gguf -----------------------------------------------------------------------------------

GgufFile one_tensor_file(GgmlType type, std::vector<uint64_t> dims, std::vector<uint8_t> data) {
  GgufWriter writer;
  writer.add_tensor("blk.0.ffn_up.weight", type, std::move(dims), std::move(data));
  return GgufFile::parse(writer.to_bytes());
}

// The FormatError message from_gguf throws ("" if it accepts the tensor).
std::string from_gguf_error(const GgufFile& file, const GgufTensorInfo& info) {
  try {
    WeightMatrix::from_gguf(file, info);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(text, fragment) \
  EXPECT_NE((text).find(fragment), std::string::npos) << "\"" << (text) << "\" lacks \"" << (fragment) << "\""

TEST(WeightFromGguf, ViewsMatricesAndVectors) {
  const std::vector<float> v = random_values(64 * 3, 1);
  const GgufFile f = one_tensor_file(GgmlType::Q8_0, {64, 3}, quantize_q8_0(v));
  const WeightMatrix w = WeightMatrix::from_gguf(f, f.tensors()[0]);
  EXPECT_EQ(w.name, "blk.0.ffn_up.weight");
  EXPECT_EQ(w.type, GgmlType::Q8_0);
  EXPECT_EQ(w.rows, 3u);
  EXPECT_EQ(w.cols, 64u);
  EXPECT_EQ(w.row_bytes(), 68u);
  EXPECT_EQ(w.data.data(), f.tensor_data(f.tensors()[0]).data());

  const GgufFile g = one_tensor_file(GgmlType::F32, {64}, encode(GgmlType::F32, random_values(64, 2)));
  const WeightMatrix vec = WeightMatrix::from_gguf(g, g.tensors()[0]);
  EXPECT_EQ(vec.rows, 1u);
  EXPECT_EQ(vec.cols, 64u);
}

TEST(WeightFromGguf, RejectsThreeDimensionalTensors) {
  const GgufFile f = one_tensor_file(GgmlType::F32, {32, 2, 2}, std::vector<uint8_t>(32 * 4 * 4));
  const std::string e = from_gguf_error(f, f.tensors()[0]);
  EXPECT_CONTAINS(e, "blk.0.ffn_up.weight");
  EXPECT_CONTAINS(e, "3 dims [32, 2, 2]");
}

TEST(WeightFromGguf, RejectsUnsupportedTypes) {
  // One IQ2_XXS super-block (66 bytes) of 256 elements per row.
  const GgufFile f = one_tensor_file(GgmlType::IQ2_XXS, {256, 2}, std::vector<uint8_t>(2 * 66));
  const std::string e = from_gguf_error(f, f.tensors()[0]);
  EXPECT_CONTAINS(e, "blk.0.ffn_up.weight");
  EXPECT_CONTAINS(e, "iq2_xxs");
  EXPECT_CONTAINS(e, "q4_K");  // the message lists what is supported
  EXPECT_FALSE(weight_type_supported(GgmlType::IQ2_XXS));
  for (GgmlType t : kTypes) EXPECT_TRUE(weight_type_supported(t)) << ggml_type_name(t);
}

TEST(WeightFromGguf, RejectsColsNotAMultipleOfTheBlock) {
  // The writer and the parser refuse such a tensor, so the info is altered after parsing, as a
  // caller holding a bad GgufTensorInfo would.
  const GgufFile f = one_tensor_file(GgmlType::Q8_0, {64, 2}, quantize_q8_0(random_values(128, 1)));
  GgufTensorInfo info = f.tensors()[0];
  info.dims = {48, 2};
  const std::string e = from_gguf_error(f, info);
  EXPECT_CONTAINS(e, "blk.0.ffn_up.weight");
  EXPECT_CONTAINS(e, "dim 0 is 48");
  std::vector<uint8_t> bytes(2 * 34 * 2);
  EXPECT_THROW(WeightMatrix::view("w", GgmlType::Q4_0, 2, 48, bytes), FormatError);
}

TEST(WeightFromGguf, RejectsDataThatDoesNotFitTheFile) {
  const GgufFile f = one_tensor_file(GgmlType::F32, {32, 2}, std::vector<uint8_t>(256));
  GgufTensorInfo info = f.tensors()[0];
  info.file_offset = f.file_size() - 128;
  info.dims = {32, 3};  // the data size no longer matches the dims...
  EXPECT_CONTAINS(from_gguf_error(f, info), "384 needed");
  info.bytes = 384;  // ...and once it does, the data runs past the end of the file
  EXPECT_CONTAINS(from_gguf_error(f, info), "inside the");
  const std::vector<uint8_t> short_data(255);
  EXPECT_THROW(WeightMatrix::view("w", GgmlType::F32, 2, 32, short_data), FormatError);
  EXPECT_THROW(WeightMatrix::view("w", GgmlType::F32, 0, 32, {}), FormatError);
}

TEST(WeightStories, EveryMatrixOfStories260KMatchesTheReference) {
  const std::string path = std::string(VELOXQUANT_SHARED_DIR) + "/models/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "model not present: " << path;
  const GgufFile f = GgufFile::open(path);
  size_t matrices = 0;
  for (const GgufTensorInfo& info : f.tensors()) {
    if (info.dims.size() != 2) continue;
    const WeightMatrix w = WeightMatrix::from_gguf(f, info);
    const std::vector<float> values = f.tensor_f32(info);
    const std::vector<float> x = random_values(w.cols, matrices);
    std::vector<float> y(w.rows);
    matvec(w, x.data(), y.data());
    for (size_t i = 0; i < w.rows; ++i) {
      const Reference ref = reference_dot(&values[i * w.cols], x.data(), w.cols);
      EXPECT_LE(std::fabs(y[i] - ref.value), error_bound(w.cols, ref.abs_sum)) << info.name << " row " << i;
    }
    ++matrices;
  }
  // q, k, v, o, gate, up, down in each of 5 layers, the token embeddings and the output matrix.
  EXPECT_EQ(matrices, 5u * 7 + 2);
}

}  // namespace
}  // namespace veloxquant::runtime
