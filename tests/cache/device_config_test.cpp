// device_cache_config() and cuda::supports(): the CUDA backend on a spec. The TurboQuant tables and QJL's
// sketch are checked against the CPU cache itself: decoding keys with the configured signs and
// codebook must give what KVCache decodes, and the configured sketch the stored sign bits, so a
// DeviceCache built from them stores the CPU codec's codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/rotation.h"
#include "cuda/kitty/kitty_rules.h"
#include "cuda/kvquant/kvquant_rules.h"
#include "cuda/qjl/qjl_rules.h"
#include "cuda/turboquant/turboquant_rules.h"
#include "cuda/vecinfer/vecinfer_rules.h"
#include "expect_error.h"
#include "test_data.h"
#include "veloxquant/cache.h"
#include "veloxquant/calibration.h"
#include "veloxquant/cuda.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace veloxquant {
namespace {

cuda::CacheConfig device_cache_config(const std::string& spec, const LayerShape& shape, size_t batch, size_t capacity) {
  return cuda::device_cache_config(parse_spec(spec), shape, batch, capacity);
}

constexpr size_t kDim = 128;
const LayerShape kShape{2, kDim, 3, 11, 6};

TEST(DeviceCacheConfig, CopiesShapeAndKiviSettings) {
  const cuda::CacheConfig c = device_cache_config("kivi:kbits=4,vbits=4,group=64,residual=32", kShape, 5, 1000);
  EXPECT_EQ(c.format, "kivi");
  EXPECT_EQ(c.batch, 5u);
  EXPECT_EQ(c.kv_heads, 2u);
  EXPECT_EQ(c.head_dim, kDim);
  EXPECT_EQ(c.capacity, 1000u);
  EXPECT_EQ(c.bits, 4u);
  EXPECT_EQ(c.group, 64u);
  EXPECT_EQ(c.residual, 32u);
  EXPECT_EQ(c.rope.dims, 0u);
  EXPECT_EQ(device_cache_config("fp16", kShape, 1, 8).format, "fp16");
}

// The SpecError device_cache_config() throws for spec on a layer of shape.
std::string refusal(const std::string& spec, const LayerShape& shape = kShape) {
  return test::error_message<SpecError>([&] { device_cache_config(spec, shape, 1, 8); });
}

TEST(DeviceCacheConfig, RefusesWhatTheBackendCannotRun) {
  EXPECT_CONTAINS(refusal("kivi:kbits=2,vbits=4"), "kbits=2 and vbits=4");
  EXPECT_CONTAINS(refusal("turboquant_mse:bits=3"), "bits=3 and vbits=4");
  EXPECT_CONTAINS(refusal("turboquant_prod:bits=2"), "bits=2 and vbits=4");
  EXPECT_CONTAINS(refusal("snapkv+kivi"), "snapkv");
  EXPECT_CONTAINS(refusal("palu"), "palu runs on the CPU cache");
  EXPECT_CONTAINS(refusal("kivi:kbits=9"), "kbits");
  // What the kernels run: the head_dim, KIVI's group, QJL's sketch sizes.
  EXPECT_CONTAINS(refusal("fp16", LayerShape{2, 72, 3, 11, 6}),
                  "'fp16' on the CUDA backend: head_dim 72; expected 64, 80, 96, 128 or 256");
  EXPECT_CONTAINS(refusal("turboquant_mse:bits=1,vbits=1", LayerShape{2, 80, 3, 11, 6}),
                  "turboquant bits 1; expected 2, 3 or 4");
  EXPECT_CONTAINS(refusal("qjl:outliers=0", LayerShape{2, 80, 3, 11, 6}),
                  "qjl outliers 0 (at head_dim 80); expected 1 to 8");
  LayerShape capped{2, 128, 3, 11, 6};
  capped.softcap = -1.0f;
  EXPECT_CONTAINS(refusal("fp16", capped), "softcap -1.000000; expected a finite number >= 0");
  EXPECT_CONTAINS(refusal("kivi:kbits=4,vbits=4,group=48"), "kivi group 48; expected 32, 64, 96 or 128");
  EXPECT_CONTAINS(refusal("qjl:proj=512"), "qjl proj 512, outlier_proj 128; expected 256 and 128");
  EXPECT_CONTAINS(refusal("turboquant_mse:bits=5,vbits=5"), "turboquant bits 5; expected 2, 3 or 4");
  EXPECT_CONTAINS(refusal("kitty:vbits=8"), "kitty vbits 8; expected 2 or 4");
  EXPECT_CONTAINS(refusal("kitty:group=48"), "kitty group 48; expected 32, 64, 96 or 128");
}

TEST(DeviceCacheConfig, CopiesKittysKeySettings) {
  const cuda::CacheConfig c =
      device_cache_config("kitty:bits=4,high_bits=8,boost=0.25,vbits=4,group=64,residual=32", kShape, 1, 100);
  EXPECT_EQ(c.format, "kitty");
  EXPECT_EQ(c.bits, 4u);
  EXPECT_EQ(c.group, 64u);
  EXPECT_EQ(c.block, 64u);
  EXPECT_EQ(c.residual, 32u);
  const auto* t = dynamic_cast<const cuda::KittyTables*>(c.tables.get());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->key_bits, 4u);
  EXPECT_EQ(t->high_bits, 8u);
  EXPECT_EQ(t->boosted, 32u);  // round(0.25 x 128), as the CPU codec boosts
  // A missing or foreign table is refused by name.
  cuda::CacheConfig bare = c;
  bare.tables = nullptr;
  EXPECT_CONTAINS(cuda::kitty_problem(bare), "kitty without its key settings");
}

TEST(DeviceCacheConfig, TakesGemmaAndPhiHeads) {
  // KIVI, TurboQuant and QJL at every head size (80 and 96: KIVI stores dense value codes at 2
  // bits, TurboQuant rotates with a dense matrix, QJL's 5 and 6 outlier channels put its records
  // at any byte; value groups that divide head_dim or not).
  for (const size_t dim : {size_t{80}, size_t{96}, size_t{256}})
    for (const char* spec : {"kivi:kbits=2,vbits=2", "kivi:kbits=4,vbits=4,group=96",
                             "turboquant_mse:bits=4,vbits=4", "turboquant_prod:bits=2,vbits=2", "qjl:vbits=2",
                             "qjl:vbits=4,vgroup=48", "kitty", "kitty:vbits=4,boost=0.5,group=96"})
      EXPECT_EQ(device_cache_config(spec, LayerShape{2, dim, 3, 11, 6}, 1, 8).head_dim, dim) << spec;
  for (const char* spec : {"turboquant_mse:bits=4,vbits=4", "turboquant_prod:bits=3,vbits=3", "qjl"})
    EXPECT_EQ(device_cache_config(spec, LayerShape{2, 256, 3, 11, 6}, 1, 8).head_dim, 256u) << spec;
}

TEST(DeviceCacheConfig, CarriesTheLayersWindowAndSoftCap) {
  LayerShape gemma{2, 256, 3, 11, 6};
  gemma.window = 4096, gemma.softcap = 50.0f;
  const cuda::CacheConfig c = device_cache_config("fp16", gemma, 1, 8192);
  EXPECT_EQ(c.window, 4096u);
  EXPECT_EQ(c.softcap, 50.0f);
  EXPECT_EQ(c.head_dim, 256u);
}

TEST(DeviceCacheConfig, SupportsIsTheConfigurationsAnswer) {
  // supports() says yes exactly where a configuration is built, and otherwise gives its error.
  for (const char* spec : {"fp16", "kivi:kbits=4,vbits=4", "qjl", "turboquant_mse:bits=3,vbits=3", "palu",
                           "snapkv+kivi", "kivi:kbits=2,vbits=4", "kivi_sink"}) {
    for (const size_t dim : {size_t{64}, size_t{72}, size_t{80}, size_t{96}, size_t{128}, size_t{256}}) {
      const LayerShape shape{2, dim, 0, 1, 4};
      const cuda::Support s = cuda::supports(parse_spec(spec), shape);
      std::string error;
      try {
        device_cache_config(spec, shape, 1, 1);
      } catch (const SpecError& e) {
        error = e.what();
      }
      EXPECT_EQ(s.reason, error) << spec << " head_dim " << dim;
      EXPECT_EQ(static_cast<bool>(s), error.empty()) << spec << " head_dim " << dim;
    }
  }
  // The methods named as the backend's are the registry's with a CUDA form.
  std::string listed;
  for (const MethodInfo& m : registered_methods())
    if (m.cuda_config) listed += (listed.empty() ? "" : ", ") + m.name;
  EXPECT_EQ(listed, "fp16, kivi, turboquant_mse, turboquant_prod, turboquant_rvq, qjl, kitty, kvquant_nuq, "
                    "vecinfer, ratequant");
  EXPECT_CONTAINS(cuda::supports(parse_spec("palu"), kShape).reason, "the CUDA backend runs " + listed + "; palu");
}

// The rotation a TurboQuant stream's tables describe, forward (y = R x) or back (x = R^T y): the
// orthonormal Hadamard transform after random signs, or the dense matrix (head_dim 80, 96).
void rotate(std::vector<float>& y, const std::vector<float>& signs, const std::vector<float>& matrix,
            bool forward) {
  const size_t d = y.size();
  if (matrix.empty()) {
    if (forward) {
      for (size_t i = 0; i < d; ++i) y[i] *= signs[i];
    }
    fwht(y.data(), d);
    if (!forward) {
      for (size_t i = 0; i < d; ++i) y[i] *= signs[i];
    }
    return;
  }
  std::vector<float> out(d, 0.0f);
  for (size_t i = 0; i < d; ++i)
    for (size_t j = 0; j < d; ++j) out[forward ? i : j] += matrix[i * d + j] * y[forward ? j : i];
  y = out;
}

// The index of x's level: the count of boundaries <= x.
size_t count_below(const std::vector<float>& boundaries, float x) {
  return static_cast<size_t>(std::upper_bound(boundaries.begin(), boundaries.end(), x) - boundaries.begin());
}

// The encode and decode of one row with the configured tables, in the CPU codec's order of
// operations: the cache holds a block's rows in fp16 until it encodes them, then
// y = R x / |x|, codes by the boundaries, x = |x| R^T c. With a sketch S (turboquant_prod's keys)
// the decoded rotated row also gets sqrt(pi/2) / d * rho * S^T sign(S r), r = y - c the residual
// and rho = |x| |r|.
// `code` gives a rotated unit coordinate's index into centroids.
std::vector<float> decode_with_tables(std::vector<float> x, const std::vector<float>& signs,
                                      const std::vector<float>& matrix, const std::vector<float>& centroids,
                                      const std::function<size_t(float)>& code,
                                      const std::vector<float>& sketch = {}) {
  const size_t d = x.size();
  for (float& v : x) v = f16_to_f32(f32_to_f16(v));
  double norm2 = 0;
  for (float v : x) norm2 += double{v} * v;
  const float norm = static_cast<float>(std::sqrt(norm2)), inv = 1.0f / norm;
  std::vector<float> y(x), r(d);
  rotate(y, signs, matrix, true);
  double residual2 = 0;
  for (size_t i = 0; i < d; ++i) {
    const float unit = y[i] * inv;
    const float level = centroids[code(unit)];
    r[i] = unit - level;
    residual2 += double{r[i]} * r[i];
    y[i] = norm * level;
  }
  if (!sketch.empty()) {
    const double factor = std::sqrt(std::acos(-1.0) / 2) / static_cast<double>(d) * norm *
                          std::sqrt(residual2);
    for (size_t j = 0; j < d; ++j) {
      double sr = 0;
      for (size_t i = 0; i < d; ++i) sr += double{sketch[j * d + i]} * r[i];
      for (size_t i = 0; i < d; ++i)
        y[i] += static_cast<float>((sr >= 0 ? factor : -factor) * sketch[j * d + i]);
    }
  }
  rotate(y, signs, matrix, false);
  return y;
}

// Appends 16 random tokens to a CPU cache of spec and checks that every key and value row
// decodes with the configured tables (key_code / value_code: a rotated unit coordinate's index
// into the centroids) as the cache decodes it.
void expect_tables_decode_as_the_cache(const std::string& spec, const LayerShape& shape,
                                       const cuda::TurboQuantTables& t,
                                       const std::function<size_t(float)>& key_code,
                                       const std::function<size_t(float)>& value_code, uint64_t seed) {
  const size_t dim = shape.head_dim, tokens = 16, n = tokens * shape.kv_heads * dim;
  KVCache cache(spec, shape);
  const std::vector<float> k = test::gaussian(n, seed), v = test::gaussian(n, seed + 100);
  cache.append(TensorView::f32(k.data(), {tokens, shape.kv_heads, dim}),
               TensorView::f32(v.data(), {tokens, shape.kv_heads, dim}));
  const std::vector<float> cpu_k = cache.decode_keys(), cpu_v = cache.decode_values();
  const std::string where = spec + " head_dim " + std::to_string(dim);
  for (size_t row = 0; row < tokens * shape.kv_heads; ++row) {
    const auto slice = [&](const std::vector<float>& a) {
      return std::vector<float>(a.begin() + row * dim, a.begin() + (row + 1) * dim);
    };
    EXPECT_LT(test::relative_l2(decode_with_tables(slice(k), t.key_signs, t.key_rotation, t.key_centroids,
                                                   key_code, t.key_sketch),
                                slice(cpu_k)),
              1e-5)
        << where << " key row " << row;
    EXPECT_LT(test::relative_l2(decode_with_tables(slice(v), t.value_signs, t.value_rotation,
                                                   t.value_centroids, value_code),
                                slice(cpu_v)),
              1e-5)
        << where << " value row " << row;
  }
}

TEST(DeviceCacheConfig, TurboQuantTablesReproduceTheCpuCodec) {
  for (const size_t dim : {kDim, size_t{96}, size_t{80}}) {
    const LayerShape shape{2, dim, 3, 11, 6};
    for (const char* method : {"turboquant_mse", "turboquant_prod"}) {
      for (unsigned bits : {2u, 3u, 4u}) {
        const bool prod = std::string(method) == "turboquant_prod";
        const std::string spec = std::string(method) + ":bits=" + std::to_string(bits) +
                                 ",vbits=" + std::to_string(bits);
        const std::string where = spec + " head_dim " + std::to_string(dim);
        const cuda::CacheConfig c = device_cache_config(spec, shape, 1, 64);
        ASSERT_EQ(c.format, method);
        const auto* tables = cuda::tables_of<cuda::TurboQuantTables>(c);
        ASSERT_NE(tables, nullptr) << where;
        const cuda::TurboQuantTables& t = *tables;
        ASSERT_EQ(t.key_centroids.size(), size_t{1} << (prod ? bits - 1 : bits));
        ASSERT_EQ(t.value_centroids.size(), size_t{1} << bits);
        ASSERT_EQ(t.key_sketch.size(), prod ? dim * dim : 0);
        const bool hadamard = dim == kDim;
        EXPECT_EQ(t.key_signs.size(), hadamard ? dim : 0) << where;
        EXPECT_EQ(t.value_rotation.size(), hadamard ? 0 : dim * dim) << where;
        expect_tables_decode_as_the_cache(
            spec, shape, t, [&](float u) { return count_below(t.key_boundaries, u); },
            [&](float u) { return count_below(t.value_boundaries, u); }, 100 + bits);
      }
    }
  }
}

// turboquant_rvq: the joint table and the two stages' tables, with the rotations, reproduce the
// CPU cache: stage 1 counts the Gaussian boundaries at or below u = stage_scale * y, stage 2 the
// Laplacian ones at or below u - level, and the joint code i1 | i2 << bits indexes the table.
TEST(DeviceCacheConfig, TurboQuantRvqStagesReproduceTheCpuCodec) {
  for (const size_t dim : {kDim, size_t{96}, size_t{80}}) {
    const LayerShape shape{2, dim, 3, 11, 6};
    for (unsigned bits : {1u, 2u}) {
      const std::string spec = "turboquant_rvq:bits=" + std::to_string(bits) +
                               ",vbits=" + std::to_string(bits);
      const std::string where = spec + " head_dim " + std::to_string(dim);
      const cuda::CacheConfig c = device_cache_config(spec, shape, 1, 64);
      ASSERT_EQ(c.format, "turboquant_rvq");
      EXPECT_EQ(c.bits, 2 * bits);
      const auto* tables = cuda::tables_of<cuda::TurboQuantTables>(c);
      ASSERT_NE(tables, nullptr) << where;
      const cuda::TurboQuantTables& t = *tables;
      ASSERT_EQ(t.key_centroids.size(), size_t{1} << (2 * bits));
      ASSERT_EQ(t.stage1_levels.size(), size_t{1} << bits);
      EXPECT_TRUE(t.key_boundaries.empty() && t.value_boundaries.empty()) << where;
      const auto joint_code = [&](float unit) {
        const float u = t.stage_scale * unit;
        const size_t first = count_below(t.stage1_boundaries, u);
        return first | count_below(t.stage2_boundaries, u - t.stage1_levels[first]) << bits;
      };
      expect_tables_decode_as_the_cache(spec, shape, t, joint_code, joint_code, 500 + bits);
    }
  }
  EXPECT_CONTAINS(refusal("turboquant_rvq:bits=3,vbits=3"),
                  "turboquant_rvq bits 3 per stage; expected 1 or 2");
  EXPECT_CONTAINS(refusal("turboquant_rvq:bits=1,vbits=2"), "bits=1 and vbits=2");
}

// vecinfer: the calibration's tables reproduce the CPU cache's key indices (y = R (k / lambda),
// then per sub-space the nearest centroid, distances summed in double as the codec sums them) and
// its values (turboquant_mse's tables); without an artifact only the settings are checked.
TEST(DeviceCacheConfig, VecinferTablesReproduceTheCpuCodec) {
  for (const size_t dim : {kDim, size_t{96}, size_t{80}}) {
    const std::string spec = "vecinfer:vbits=4";
    const std::string where = spec + " head_dim " + std::to_string(dim);
    LayerShape shape{2, dim, 3, 11, 6};
    EXPECT_TRUE(cuda::supports(parse_spec(spec), shape)) << where;  // the settings alone
    const size_t calibration_tokens = 600;
    const std::vector<float> ck = test::gaussian(calibration_tokens * 2 * dim, 7),
                             cv = test::gaussian(calibration_tokens * 2 * dim, 8);
    shape.calibration = calibrate_on_samples(parse_spec(spec), {ck, cv, calibration_tokens, 2, dim, 0}, 6);
    const cuda::CacheConfig c = device_cache_config(spec, shape, 1, 64);
    ASSERT_EQ(c.format, "vecinfer");
    EXPECT_EQ(c.bits, 4u);
    const auto* tables = cuda::tables_of<cuda::VecinferTables>(c);
    ASSERT_NE(tables, nullptr) << where;
    const cuda::VecinferTables& t = *tables;
    const size_t dims = t.dims, subspaces = dim / dims;
    ASSERT_EQ(t.codebooks.size(), 2 * dim * t.centroids) << where;

    const size_t tokens = 16;
    KVCache cache(spec, shape);
    const std::vector<float> k = test::gaussian(tokens * 2 * dim, 9),
                             v = test::gaussian(tokens * 2 * dim, 10);
    cache.append(TensorView::f32(k.data(), {tokens, 2, dim}), TensorView::f32(v.data(), {tokens, 2, dim}));
    for (size_t h = 0; h < 2; ++h) {
      const std::vector<uint8_t>& codes = cache.key_streams()[h].codes;
      ASSERT_EQ(codes.size(), tokens * subspaces) << where;
      for (size_t tok = 0; tok < tokens; ++tok) {
        std::vector<float> y(dim);
        for (size_t i = 0; i < dim; ++i)
          y[i] = f16_to_f32(f32_to_f16(k[(tok * 2 + h) * dim + i])) / t.smooth[h * dim + i];
        rotate(y, t.key_signs, t.key_rotation, true);
        for (size_t s = 0; s < subspaces; ++s) {
          size_t best = 0;
          double best_d = INFINITY;
          for (size_t j = 0; j < t.centroids; ++j) {
            const float* centroid = t.codebooks.data() + ((h * subspaces + s) * t.centroids + j) * dims;
            double d = 0;
            for (size_t i = 0; i < dims; ++i) {
              const double e = static_cast<double>(y[s * dims + i]) - centroid[i];
              d += e * e;
            }
            if (d < best_d) best = j, best_d = d;
          }
          EXPECT_EQ(codes[tok * subspaces + s], best) << where << " KV head " << h << " token " << tok;
        }
      }
    }
    const std::vector<float> cpu_v = cache.decode_values();
    const cuda::TurboQuantTables& tv = t.values;
    for (size_t row = 0; row < tokens * 2; ++row) {
      const std::vector<float> x(v.begin() + row * dim, v.begin() + (row + 1) * dim);
      const std::vector<float> ref(cpu_v.begin() + row * dim, cpu_v.begin() + (row + 1) * dim);
      EXPECT_LT(
          test::relative_l2(decode_with_tables(x, tv.value_signs, tv.value_rotation, tv.value_centroids,
                                               [&](float u) { return count_below(tv.value_boundaries, u); }),
                            ref),
          1e-5)
          << where << " value row " << row;
    }
  }
  // The attention block's table and tiles must fit a multiprocessor's shared memory.
  EXPECT_CONTAINS(cuda::supports(parse_spec("vecinfer"), LayerShape{2, 256, 0, 1}).reason,
                  "expected at most 232448 (longer sub-vectors or fewer centroids fit)");
  EXPECT_TRUE(cuda::supports(parse_spec("vecinfer:dims=16"), LayerShape{2, 256, 0, 1}));
  EXPECT_TRUE(
      cuda::supports(parse_spec("vecinfer:vbits=3"), LayerShape{2, 80, 0, 1}));  // 34-byte value records
}

// kvquant_nuq: the artifact's tables, every KV head's, as the CPU codecs decode with them (each
// key element mid + half x level through its channel's range), and keys marked as stored before
// RoPE. Appended without RoPE here, so the CPU's decoded keys are the stored ones.
TEST(DeviceCacheConfig, KvquantTablesAreTheCodecsAndKeysStayBeforeRope) {
  const std::string spec = "kvquant_nuq:bits=3";
  LayerShape shape{2, kDim, 3, 11, 6};
  EXPECT_TRUE(cuda::supports(parse_spec(spec), shape));  // the settings alone
  const size_t calibration_tokens = 600, d = kDim;
  shape.calibration = calibrate_on_samples(parse_spec(spec),
                                           {test::gaussian(calibration_tokens * 2 * d, 7),
                                            test::gaussian(calibration_tokens * 2 * d, 8), calibration_tokens,
                                            2, d, 0},
                                           6);
  const cuda::CacheConfig c = device_cache_config(spec, shape, 1, 64);
  ASSERT_EQ(c.format, "kvquant_nuq");
  EXPECT_EQ(c.bits, 3u);
  EXPECT_TRUE(c.keys_before_rope);
  EXPECT_FALSE(device_cache_config("kivi", shape, 1, 64).keys_before_rope);
  const auto* tables = cuda::tables_of<cuda::KvquantTables>(c);
  ASSERT_NE(tables, nullptr);
  const cuda::KvquantTables& t = *tables;
  EXPECT_EQ(t.outliers, 1u);  // round(0.01 x 128)
  EXPECT_TRUE(t.sink);
  ASSERT_EQ(t.key_levels.size(), 2u * 8);
  ASSERT_EQ(t.key_lo.size(), 2 * d);

  const size_t tokens = 16;
  KVCache cache(spec, shape);
  const std::vector<float> k = test::gaussian(tokens * 2 * d, 9), v = test::gaussian(tokens * 2 * d, 10);
  cache.append(TensorView::f32(k.data(), {tokens, 2, d}), TensorView::f32(v.data(), {tokens, 2, d}));
  const std::vector<float> decoded = cache.decode_keys();
  const cuda::KvquantRecord record = cuda::kvquant_record(c, t.outliers, t.sink, false);
  for (size_t h = 0; h < 2; ++h) {
    const std::vector<uint8_t>& codes = cache.key_streams()[h].codes;
    ASSERT_EQ(codes.size(), tokens * record.bytes());
    for (size_t tok = 1; tok < tokens; ++tok) {  // token 0 is the stream's first, kept exact
      const uint8_t* rec = codes.data() + tok * record.bytes();
      const size_t outlier = rec[record.slots_offset()] | rec[record.slots_offset() + 1] << 8;
      for (size_t ch = 0; ch < d; ++ch) {
        if (ch == outlier) continue;
        const size_t bit = ch * 3, code = (rec[bit / 8] | rec[bit / 8 + 1] << 8) >> (bit % 8) & 7u;
        const float lo = t.key_lo[h * d + ch], hi = t.key_hi[h * d + ch];
        const float expected = (lo + hi) * 0.5f + (hi - lo) * 0.5f * t.key_levels[h * 8 + code];
        EXPECT_FLOAT_EQ(decoded[(tok * 2 + h) * d + ch], expected)
            << "KV head " << h << " token " << tok << " channel " << ch;
      }
    }
  }
  // Records past what an attention block's shared memory holds are refused, naming the setting.
  EXPECT_CONTAINS(cuda::supports(parse_spec("kvquant_nuq:outliers=0.5"), LayerShape{2, 256, 0, 1}).reason,
                  "a smaller outliers= fits");
}

// ratequant: its inner quantizer's GPU form at the layer's width, when the layer's heads share one.
TEST(DeviceCacheConfig, RatequantRunsItsInnerQuantizerAtEachLayersWidth) {
  LayerShape shape{2, kDim, 0, 11, 3};
  for (int layer = 0; layer < 3; ++layer) {
    shape.layer = layer;
    const cuda::CacheConfig c = device_cache_config("ratequant:bits=2/4/2+kivi", shape, 1, 64);
    EXPECT_EQ(c.format, "kivi");
    EXPECT_EQ(c.bits, layer == 1 ? 4u : 2u) << "layer " << layer;
    const cuda::CacheConfig direct = device_cache_config(layer == 1 ? "kivi:kbits=4,vbits=4" : "kivi", shape,
                                                         1, 64);
    EXPECT_EQ(c.group, direct.group);
    EXPECT_EQ(c.residual, direct.residual);
  }
  shape.layer = 1;
  EXPECT_CONTAINS(
      cuda::supports(parse_spec("ratequant:bits=2/2/4/2/2/2+kivi"), shape).reason,
      "ratequant gives layer 1's KV heads the widths 4/2; a GPU cache layer codes its heads with one");
  EXPECT_CONTAINS(cuda::supports(parse_spec("ratequant:bits=2/4/2+polar"), shape).reason,
                  "ratequant wraps polar, which runs on the CPU cache only");
  // Without widths or a calibration, the inner quantizer's own answer, but per=head over several
  // KV heads could give them different widths.
  EXPECT_TRUE(cuda::supports(parse_spec("ratequant:per=layer+kivi"), shape));
  EXPECT_TRUE(cuda::supports(parse_spec("ratequant+kivi"), LayerShape{1, kDim, 0, 1}));
  EXPECT_CONTAINS(cuda::supports(parse_spec("ratequant+kivi"), shape).reason,
                  "ratequant per=head gives each of a layer's 2 KV heads a width of its own");
  EXPECT_CONTAINS(
      cuda::supports(parse_spec("ratequant:per=layer+turboquant_prod:bits=2,vbits=4"), shape).reason,
      "bits=2 and vbits=4");
}

// qjl: the sizes make() settles on for the head_dim, and a sketch that reproduces the CPU codec's
// sign bits: for each stored token, sign(S k_I) with the configured S and the block's inlier
// channels must be the stored inlier bits (products near 0 aside, where the order of the sum may
// decide the sign).
TEST(DeviceCacheConfig, QjlSketchReproducesTheCpuCodec) {
  for (const size_t dim : {size_t{64}, size_t{128}}) {
    const LayerShape shape{2, dim, 3, 11, 6};
    const std::string spec = "qjl:vbits=4,vgroup=64,residual=0";
    const cuda::CacheConfig c = device_cache_config(spec, shape, 2, 100);
    ASSERT_EQ(c.format, "qjl");
    const auto* tables = cuda::tables_of<cuda::QjlTables>(c);
    ASSERT_NE(tables, nullptr);
    const cuda::QjlTables& q = *tables;
    EXPECT_EQ(c.bits, 4u);
    EXPECT_EQ(c.group, 32u);
    EXPECT_EQ(c.residual, 0u);
    EXPECT_EQ(q.proj, 256u);
    EXPECT_EQ(q.outlier_proj, 128u);
    EXPECT_EQ(q.outliers, dim / 16);  // 8 at head_dim 128, capped to 4 at 64
    EXPECT_EQ(q.value_group, 64u);
    ASSERT_EQ(q.sketch.size(), 256 * dim);
    KVCache cache(spec, shape);
    const size_t tokens = 32, n = tokens * shape.kv_heads * dim;
    const std::vector<float> k = test::gaussian(n, 300 + dim), v = test::gaussian(n, 400 + dim);
    cache.append(TensorView::f32(k.data(), {tokens, shape.kv_heads, dim}),
                 TensorView::f32(v.data(), {tokens, shape.kv_heads, dim}));
    const size_t record = (q.proj + q.outlier_proj) / 8 + 4;
    size_t checked = 0, differing = 0;
    for (size_t h = 0; h < shape.kv_heads; ++h) {
      const std::vector<uint8_t>& codes = cache.key_streams()[h].codes;
      ASSERT_EQ(codes.size(), q.outliers + tokens * record);
      std::vector<bool> outlier(dim, false);
      for (size_t j = 0; j < q.outliers; ++j) outlier[codes[j]] = true;
      for (size_t t = 0; t < tokens; ++t) {
        const uint8_t* bits = codes.data() + q.outliers + t * record;
        for (size_t i = 0; i < q.proj; ++i) {
          double sk = 0, size = 0;
          for (size_t ch = 0; ch < dim; ++ch) {
            if (outlier[ch]) continue;
            const double term = double{q.sketch[i * dim + ch]} * f16_to_f32(f32_to_f16(k[(t * shape.kv_heads + h) * dim + ch]));
            sk += term, size += std::abs(term);
          }
          if (std::abs(sk) < 1e-5 * size) continue;
          ++checked;
          differing += ((bits[i / 8] >> (i % 8)) & 1) != (sk > 0 ? 1 : 0);
        }
      }
    }
    EXPECT_EQ(differing, 0u) << "head_dim " << dim;
    EXPECT_GT(checked, 2 * tokens * q.proj * 99 / 100) << "head_dim " << dim;
  }
}

}  // namespace
}  // namespace veloxquant
