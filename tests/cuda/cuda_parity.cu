// Parity of every CUDA kernel with the CPU reference, on fresh random inputs, on GoogleTest. The
// cache cases are generated from the registry: every method with a CUDA form x its bit widths x
// head_dim {64, 80, 96, 128, 256} x query heads per KV head {1, 4, 8}, sliding windows and soft
// caps, plus a few non-default settings;
// a case the backend does not hold (cuda::supports) is skipped with its reason.
//  - quantize-on-append: the GPU's streams against KVCache::key_streams()/value_streams() of CPU
//    caches fed the same rows, positions and RoPE (a prefill append, then single-token steps):
//    bytes that differ are counted (expected 0; the arithmetic is the CPU codecs', see docs/cuda.md),
//    except turboquant_prod's key sign bits, sign(S r), which the GPU sums in another order than
//    the CPU's SIMD dot: a sign may flip where S r is within rounding of 0, so they are counted
//    apart and may differ in at most 1 of 10^4; qjl's key sign bits likewise;
//  - decode attention: the GPU output against KVCache::attend(AttendPath::Reference) of the CPU
//    cache, and of a CPU cache restored from the GPU's own streams (GPU codes decoded by the CPU
//    codecs), as ||out - ref|| / ||ref||, under a bound per method;
//  - the vector-quantization kernels (vq_parity.cu: VecInfer's assignment and ADC scores,
//    RaBitQ's scores) against the CPU codecs, in a second table.
// Outputs are poisoned (NaN) before each run and every element must be written. Each case prints
// a row of a markdown table (lines starting '|'; bench/cuda/run_h200.sh keeps them).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "cuda/common/check.cuh"
#include "cuda/qjl/qjl_rules.h"
#include "parity_util.h"
#include "sampler_parity.h"
#include "veloxquant/cache.h"
#include "veloxquant/calibration.h"
#include "veloxquant/cuda.h"
#include "veloxquant/method.h"
#include "veloxquant/tensor.h"
#include "vq_parity.h"

namespace vq = veloxquant;
namespace vc = veloxquant::cuda;
using vc::parity::DeviceBuffer;
using vc::parity::normalized_error;
using vc::parity::poisoned_attend;

namespace {

struct Case {
  std::string name, spec;   // the GPU's configuration comes from the spec (device_cache_config)
  size_t dim, group_heads;  // head_dim, query heads per KV head
  size_t window = 0;        // a sliding-window layer's window (0: none)
  float softcap = 0.0f;     // soft-capped scores (0: none)
};

// GoogleTest names a case's parameter with this (and CTest's test names carry it), rather than
// with the struct's bytes.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.spec << " head_dim " << c.dim << ", " << c.group_heads << " query heads per KV head";
  if (c.window) *os << ", window " << c.window;
  if (c.softcap != 0.0f) *os << ", softcap " << c.softcap;
}

constexpr size_t kBatch = 2, kKvHeads = 2, kPrefill = 300, kSteps = 41;
constexpr size_t kCausal = 70;  // prompt queries attending causally (past a 64-token residual window)
constexpr int kLayer = 3;
constexpr uint64_t kSeed = 42;

// A calibrated method's artifact for a case's head_dim, fitted once to random rows whose every
// 16th key channel is 5 times wider (outlier channels, as real keys have); null for a spec that
// needs none (ratequant's explicit widths, which its fit refuses).
std::shared_ptr<const vq::CalibrationArtifact> calibration_for(const vq::Spec& spec, size_t dim) {
  static std::map<std::string, std::shared_ptr<const vq::CalibrationArtifact>> fitted;
  const auto widths = spec.params.strings.find("bits");
  if (widths != spec.params.strings.end() && !widths->second.empty()) return nullptr;
  auto& a = fitted[spec.to_string() + " " + std::to_string(dim)];
  if (!a) {
    constexpr size_t kTokens = 1024;
    std::mt19937 gen(20261206);
    std::normal_distribution<float> normal;
    std::vector<float> keys(kTokens * kKvHeads * dim), values(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      keys[i] = normal(gen) * (i % dim % 16 == 0 ? 5.0f : 1.0f);
      values[i] = normal(gen);
    }
    a = vq::calibrate_on_samples(spec, vq::CalibrationSamples{keys, values, kTokens, kKvHeads, dim, 0},
                                 kLayer + 1);
  }
  return a;
}

// The layer a case's caches are made for, on both backends, with its artifact when the method is
// calibrated.
vq::LayerShape layer_shape(const Case& k) {
  vq::LayerShape shape{kKvHeads, k.dim, kLayer, kSeed};
  shape.window = k.window, shape.softcap = k.softcap;
  const vq::Spec spec = vq::parse_spec(k.spec);
  shape.layers = kLayer + 1;
  if (spec.method->calibrated()) shape.calibration = calibration_for(spec, k.dim);
  return shape;
}

vq::RopeParams llama_rope(size_t dim) {
  vq::RopeParams r;
  r.dims = static_cast<uint32_t>(dim);
  r.freq_base = 10000.0f;
  return r;
}

size_t differing(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

// For the fp16 format, whose codes are the rows themselves: the first differing key element of a
// stream, with its token and channel, so that a mismatch says where it starts.
void report_first_difference(const std::vector<uint8_t>& gpu, const std::vector<uint8_t>& cpu,
                             size_t dim, size_t b, size_t h) {
  for (size_t i = 0; i + 1 < std::min(gpu.size(), cpu.size()); i += 2) {
    uint16_t g, c;
    std::memcpy(&g, gpu.data() + i, 2);
    std::memcpy(&c, cpu.data() + i, 2);
    if (g == c) continue;
    const size_t t = i / 2 / dim, ch = i / 2 % dim;
    std::fprintf(stderr, "first difference: sequence %zu, KV head %zu, token %zu, channel %zu: "
                 "gpu %a (0x%04x), cpu %a (0x%04x)\n", b, h, t, ch, vq::f16_to_f32(g), g,
                 vq::f16_to_f32(c), c);
    return;
  }
}

// turboquant_prod's key records [f32 norm][f32 rho][codes][sign bits]: bytes that differ outside
// the sign bits into code_diff, sign bits that differ into sign_diff, out of sign_bits.
void compare_prod_keys(const std::vector<uint8_t>& gpu, const std::vector<uint8_t>& cpu, size_t dim,
                       unsigned bits, size_t& code_diff, size_t& sign_diff, size_t& sign_bits) {
  const size_t signs = dim / 8, record = 8 + dim * (bits - 1) / 8 + signs;
  if (gpu.size() != cpu.size() || cpu.size() % record != 0) {
    code_diff += std::max(gpu.size(), cpu.size());
    return;
  }
  for (size_t at = 0; at < cpu.size(); at += record) {
    for (size_t i = 0; i < record - signs; ++i) code_diff += gpu[at + i] != cpu[at + i];
    for (size_t i = record - signs; i < record; ++i)
      sign_diff += static_cast<size_t>(__builtin_popcount(gpu[at + i] ^ cpu[at + i]));
    sign_bits += dim;
  }
}

// qjl's key blocks [outlier channels][per token: inlier signs, outlier signs, 2 fp16 RMS]: sign
// bits are counted apart like turboquant_prod's (the sketch sums run in the CPU's order, but the
// CPU's SIMD build may fuse its multiply-adds where the GPU's do not); headers and norms go to
// code_diff.
void compare_qjl_keys(const std::vector<uint8_t>& gpu, const std::vector<uint8_t>& cpu, const vc::CacheConfig& c,
                      size_t& code_diff, size_t& sign_diff, size_t& sign_bits) {
  const vc::QjlTables& q = *vc::tables_of<vc::QjlTables>(c);
  const size_t signs = (q.proj + q.outlier_proj) / 8, record = signs + 4;
  const size_t block = q.outliers + c.group * record;
  if (gpu.size() != cpu.size() || cpu.size() % block != 0) {
    code_diff += std::max(gpu.size(), cpu.size());
    return;
  }
  bool reported = false;
  for (size_t at = 0; at < cpu.size(); at += block) {
    for (size_t i = 0; i < q.outliers; ++i) code_diff += gpu[at + i] != cpu[at + i];
    for (size_t r = at + q.outliers; r < at + block; r += record) {
      for (size_t i = 0; i < signs; ++i) sign_diff += static_cast<size_t>(__builtin_popcount(gpu[r + i] ^ cpu[r + i]));
      for (size_t i = signs; i < record; ++i) code_diff += gpu[r + i] != cpu[r + i];
      // The first record whose norms differ, once per stream (report_first_difference's for fp16).
      if (!reported && std::memcmp(&gpu[r + signs], &cpu[r + signs], 4) != 0) {
        reported = true;
        std::fprintf(stderr,
                     "first norm difference: block at byte %zu, record %zu: gpu %02x %02x %02x %02x, cpu "
                     "%02x %02x %02x %02x\n",
                     at, (r - at - q.outliers) / record, gpu[r + signs], gpu[r + signs + 1],
                     gpu[r + signs + 2], gpu[r + signs + 3], cpu[r + signs], cpu[r + signs + 1],
                     cpu[r + signs + 2], cpu[r + signs + 3]);
      }
      sign_bits += 8 * signs;
    }
  }
}

struct Result {
  size_t code_bytes = 0, code_diff = 0, tail_diff = 0, sign_bits = 0, sign_diff = 0;
  double err_cpu = 0, err_restored = 0, err_causal = 0;
  bool all_written = true;
};

// The parity helpers (parity_util.h) at this file's batch and KV heads.
std::vector<uint16_t> random_rows(std::mt19937& gen, size_t n, size_t dim, bool keys) {
  return vc::parity::random_rows(gen, kBatch * kKvHeads, n, dim, keys);
}
std::vector<uint16_t> cpu_rows(const std::vector<uint16_t>& x, size_t b, size_t n, size_t dim) {
  return vc::parity::cpu_rows(x, kKvHeads, b, n, dim);
}

// Attends on the GPU (poisoned output) and on the CPU caches; accumulates the errors into r.
void compare_attention(const Case& k, vc::DeviceCache& gpu, std::vector<vq::KVCache>& cpu,
                       std::mt19937& gen, Result& r) {
  const size_t d = k.dim, qh = kKvHeads * k.group_heads, n = kBatch * qh * d;
  std::vector<uint16_t> q;
  const std::vector<float> out = poisoned_attend(gen, q, n, r.all_written,
                                                 [&](const uint16_t* dq, float* dout) { gpu.attend(dq, qh, dout); });
  std::vector<float> ref(n), restored(n);
  for (size_t b = 0; b < kBatch; ++b) {
    const auto view = vq::TensorView::f16(q.data() + b * qh * d, {1, qh, d});
    cpu[b].attend(view, ref.data() + b * qh * d, vq::AttendPath::Reference);
    // The GPU's own streams, decoded by the CPU codecs.
    vq::KVCache from_gpu(cpu[b].spec(), cpu[b].shape());
    std::vector<vq::CacheStream> keys(kKvHeads), values(kKvHeads);
    for (size_t h = 0; h < kKvHeads; ++h) {
      const vc::HostStream ks = gpu.download_keys(b, h), vs = gpu.download_values(b, h);
      // The GPU's fitted state where it keeps one (kvquant_nuq's first token); else the stream's
      // state is the spec's (VecInfer's calibrated tables), the same on both.
      const auto state = [](const vc::HostStream& g, const vq::CacheStream& c) {
        return g.state.empty() ? c.state : g.state;
      };
      keys[h] = vq::CacheStream{state(ks, cpu[b].key_streams()[h]), ks.codes, ks.encoded, ks.tail,
                                ks.tail_tokens};
      values[h] = vq::CacheStream{state(vs, cpu[b].value_streams()[h]), vs.codes, vs.encoded, vs.tail,
                                  vs.tail_tokens};
    }
    from_gpu.restore(std::move(keys), std::move(values));
    from_gpu.attend(view, restored.data() + b * qh * d, vq::AttendPath::Reference);
  }
  r.err_cpu = std::max(r.err_cpu, normalized_error(out, ref));
  r.err_restored = std::max(r.err_restored, normalized_error(out, restored));
}

// kBatch sequences of kPrefill tokens, then the causal attention of each one's newest kCausal
// queries in one call: q and out are [kCausal, kBatch, q_heads, dim], query i of every sequence
// one row block.
double compare_causal(const Case& k, std::mt19937& gen, bool& all_written) {
  const size_t d = k.dim, qh = kKvHeads * k.group_heads, row = qh * d, n = kCausal * kBatch * row;
  const vq::LayerShape shape = layer_shape(k);
  vc::DeviceCache gpu(vc::device_cache_config(vq::parse_spec(k.spec), shape, kBatch, kPrefill));
  const std::vector<uint16_t> keys = random_rows(gen, kPrefill, d, true), values = random_rows(gen, kPrefill, d, false);
  DeviceBuffer<uint16_t> dk(keys.size()), dv(values.size());
  dk.upload(keys), dv.upload(values);
  gpu.append(dk.ptr, dv.ptr, nullptr, kPrefill);  // no RoPE: keys as given, like KVCache::append(k, v)
  std::vector<uint16_t> q;
  const std::vector<float> out = poisoned_attend(
      gen, q, n, all_written, [&](const uint16_t* dq, float* dout) { gpu.attend_causal(dq, kCausal, qh, dout); });
  std::vector<float> ref(n), seq_ref(kCausal * row);
  std::vector<uint16_t> seq_q(kCausal * row);
  for (size_t b = 0; b < kBatch; ++b) {
    vq::KVCache cpu(k.spec, shape);
    const std::vector<uint16_t> kb = cpu_rows(keys, b, kPrefill, d), vb = cpu_rows(values, b, kPrefill, d);
    cpu.append(vq::TensorView::f16(kb.data(), {kPrefill, kKvHeads, d}),
               vq::TensorView::f16(vb.data(), {kPrefill, kKvHeads, d}));
    for (size_t i = 0; i < kCausal; ++i)
      std::copy_n(q.data() + (i * kBatch + b) * row, row, seq_q.data() + i * row);
    cpu.attend(vq::TensorView::f16(seq_q.data(), {kCausal, qh, d}), seq_ref.data(), vq::AttendPath::Reference);
    for (size_t i = 0; i < kCausal; ++i)
      std::copy_n(seq_ref.data() + i * row, row, ref.data() + (i * kBatch + b) * row);
  }
  return normalized_error(out, ref);
}

Result run_case(const Case& k, std::mt19937& gen) {
  const size_t d = k.dim, total = kPrefill + kSteps;
  const vq::LayerShape shape = layer_shape(k);
  vc::CacheConfig config = vc::device_cache_config(vq::parse_spec(k.spec), shape, kBatch, total);
  config.rope = llama_rope(d);  // the runtime's append: the GPU rotates keys as the CPU cache does
  vc::DeviceCache gpu(config);
  std::vector<vq::KVCache> cpu;
  for (size_t b = 0; b < kBatch; ++b) cpu.emplace_back(k.spec, shape);
  // Keys stored before RoPE turn token i to position i (KVCache::append refuses other positions);
  // the others take each sequence's own positions.
  const size_t sequence_offset = config.keys_before_rope ? 0 : 1000;

  Result r;
  size_t at = 0;
  const auto append = [&](size_t n) {
    const std::vector<uint16_t> keys = random_rows(gen, n, d, true), values = random_rows(gen, n, d, false);
    std::vector<int64_t> pos(kBatch * n);
    for (size_t b = 0; b < kBatch; ++b)
      for (size_t t = 0; t < n; ++t) pos[b * n + t] = static_cast<int64_t>(at + t + sequence_offset * b);
    DeviceBuffer<uint16_t> dk(keys.size()), dv(values.size());
    DeviceBuffer<int64_t> dp(pos.size());
    dk.upload(keys), dv.upload(values), dp.upload(pos);
    gpu.append(dk.ptr, dv.ptr, dp.ptr, n);
    VQ_CUDA_CHECK(cudaGetLastError());
    VQ_CUDA_CHECK(cudaDeviceSynchronize());
    for (size_t b = 0; b < kBatch; ++b) {
      const std::vector<uint16_t> kb = cpu_rows(keys, b, n, d), vb = cpu_rows(values, b, n, d);
      cpu[b].append(vq::TensorView::f16(kb.data(), {n, kKvHeads, d}), vq::TensorView::f16(vb.data(), {n, kKvHeads, d}),
                    std::span<const int64_t>(pos.data() + b * n, n), config.rope);
    }
    at += n;
  };
  append(kPrefill);
  compare_attention(k, gpu, cpu, gen, r);
  for (size_t s = 0; s < kSteps; ++s) append(1);
  compare_attention(k, gpu, cpu, gen, r);
  for (size_t b = 0; b < kBatch; ++b)
    for (size_t h = 0; h < kKvHeads; ++h) {
      const vc::HostStream gk = gpu.download_keys(b, h), gv = gpu.download_values(b, h);
      const vq::CacheStream& ck = cpu[b].key_streams()[h];
      const vq::CacheStream& cv = cpu[b].value_streams()[h];
      r.code_bytes += ck.codes.size() + cv.codes.size();
      if (config.format == "turboquant_prod") {
        compare_prod_keys(gk.codes, ck.codes, d, config.bits, r.code_diff, r.sign_diff, r.sign_bits);
      } else if (config.format == "qjl") {
        compare_qjl_keys(gk.codes, ck.codes, config, r.code_diff, r.sign_diff, r.sign_bits);
      } else {
        r.code_diff += differing(gk.codes, ck.codes);
      }
      r.code_diff += differing(gv.codes, cv.codes);
      if (config.format == "fp16" && b + h == 0) report_first_difference(gk.codes, ck.codes, d, b, h);
      r.code_diff += (gk.encoded != ck.encoded) + (gv.encoded != cv.encoded);
      if (!gk.state.empty() || !gv.state.empty())  // a state the GPU fits itself (kvquant_nuq's)
        r.code_diff += differing(gk.state, ck.state) + differing(gv.state, cv.state);
      r.tail_diff += differing(gk.tail, ck.tail) + differing(gv.tail, cv.tail);
    }
  r.err_causal = compare_causal(k, gen, r.all_written);
  return r;
}

// Bounds: the codes are identical, so only the arithmetic separates the GPU from the CPU
// reference. Every kernel runs on tensor cores with fp16 operands: the probabilities, and for
// KIVI the query times each channel's scale and the probabilities times each token's scale, for
// TurboQuant the rotated query and the codebook levels, are rounded to fp16's 11 significant
// bits (about 2.4e-4 relative on average), and turboquant_prod's sketched query likewise, hence
// 1e-3 (a 2-bit cache's own error is about 0.3). KIVI's value path sums (p s) q over codes q
// in 0..2^bits - 1 and adds sum p z: each fp16-rounded p s carries its 2^-12 into a term of
// size s q, about 3 times the value it encodes (a group's range over its mean magnitude), while
// the output is the small mean of many values, so the error is about 2.4e-4 x 3 = 7e-4 and its
// largest over the checks passes 1e-3 on some draws (1.58e-3 on kivi4 d64 g1, one head per
// group: fewest outputs): 2e-3. qjl rounds three score operands to fp16 (the sketched query,
// the block's outlier columns of S and each token's outlier terms E) on top of that value
// path: 2e-3 as well. turboquant_rvq's codes index a joint table of its two stages' levels, whose
// fp16 roundings are systematic: every token using a level shares its error. At 1 bit per stage
// and head_dim 64 or 256 the outer levels (+-(c1 + c2) / sqrt(d)) round 3.9e-4 off, twice the
// largest rounding of turboquant_mse's 2-bit levels (1.8e-4), and its errors reached 1.3e-3 where
// turboquant_mse's reached 6.8e-4 (H100, 2026-12-06): 2e-3.
// vecinfer scores a token by the sum of one table entry per sub-space (16 at head_dim 128), each
// q'_s . c_sj rounded to fp16 where TurboQuant rounds the query and the levels once per product:
// 2e-3 (its 39 cases gave 3.2e-4 to 6.7e-4 on an H100, 2026-12-06).
// kvquant_nuq decodes its keys and values into fp16 rows before the tensor cores take them: every
// element of both is rounded to fp16 where an fp16 cache's rows are exact, on top of the
// probabilities' rounding: 2e-3 (its 55 cases gave 3.4e-4 to 8.8e-4 on an H100, 2026-12-07).
// kitty's keys are decoded to fp16 rows likewise, and its values take KIVI's path: 2e-3.
double bound_for(const std::string& format) {
  return format == "kivi" || format == "qjl" || format == "turboquant_rvq" || format == "vecinfer" ||
                 format == "kvquant_nuq" || format == "kitty"
             ? 2e-3
             : 1e-3;
}

// A spec with every bit-width parameter (a name ending in "bits") at b, or none when one of them
// cannot take b; a method without such parameters gives its plain name for b == 0 only.
std::optional<std::string> at_bits(const vq::MethodInfo& m, long b) {
  std::string args;
  for (const vq::ParamDef& p : m.params) {
    if (!p.name.ends_with("bits")) continue;
    const std::string v = std::to_string(b);
    const bool ok = p.type == vq::ParamType::Choice ? std::find(p.choices.begin(), p.choices.end(), v) != p.choices.end()
                                                    : p.min <= b && b <= p.max;
    if (!ok) return std::nullopt;
    args += (args.empty() ? "" : ",") + p.name + "=" + v;
  }
  if (args.empty()) return b == 0 ? std::optional<std::string>(m.name) : std::nullopt;
  return b == 0 ? std::nullopt : std::optional<std::string>(m.name + ":" + args);
}

std::string test_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

std::vector<Case> generated_cases() {
  std::vector<Case> cases;
  std::vector<std::string> specs;
  for (const vq::MethodInfo& m : vq::registered_methods()) {
    if (!m.cuda_config) continue;
    for (long b : {0, 1, 2, 3, 4})
      if (const auto spec = at_bits(m, b)) specs.push_back(*spec);
  }
  for (const std::string& spec : specs) {
    for (size_t dim : {64, 80, 96, 128, 256})
      for (size_t g : {1, 4, 8})
        cases.push_back({test_name(spec) + "_d" + std::to_string(dim) + "_g" + std::to_string(g), spec, dim, g});
    // Gemma's attention: a sliding window shorter than the prompt (the causal check's queries
    // each see another range; the residual windows lie partly outside it) and soft-capped scores
    // (Gemma 2's 50, on scores of unit-variance rows).
    cases.push_back({test_name(spec) + "_d128_g2_window100_cap", spec, 128, 2, 100, 5.0f});
    cases.push_back({test_name(spec) + "_d64_g4_window40", spec, 64, 4, 40, 0.0f});
  }
  // Settings beside the defaults: KIVI's groups of 64, 96 and 128 tokens, QJL's 64-token groups,
  // 64-channel value groups and shorter residual windows.
  for (const Case& c : std::vector<Case>{
           {"kivi2_G128_d128_g4", "kivi:kbits=2,vbits=2,group=128,residual=64", 128, 4},
           {"kivi4_G64_d128_g8", "kivi:kbits=4,vbits=4,group=64,residual=64", 128, 8},
           {"kivi2_G64_d64_g2", "kivi:kbits=2,vbits=2,group=64,residual=64", 64, 2},
           {"qjl4_R64_d128_g8", "qjl:vbits=4,residual=64", 128, 8},
           {"qjl2_G64_V64_R32_d128_g4", "qjl:vbits=2,group=64,vgroup=64,residual=32", 128, 4},
           {"qjl4_V64_d64_g8", "qjl:vbits=4,vgroup=64", 64, 8},
           // QJL with records at odd bytes (3 outlier channels), and value groups the lane quads
           // do not take (48 channels: the dense stream; 16: lane quads decoded per tile).
           {"qjl4_O3_V48_d128_g4", "qjl:vbits=4,outliers=3,vgroup=48", 128, 4},
           {"qjl2_V16_d64_g2", "qjl:vbits=2,vgroup=16,residual=32", 64, 2},
           // KIVI's value layouts: lane quads of one 96-channel group; the dense stream with
           // groups that do not divide head_dim (96 of 128, 64 of 80).
           {"kivi4_G96_d96_g4", "kivi:kbits=4,vbits=4,group=96,residual=64", 96, 4},
           {"kivi2_G96_d128_g4", "kivi:kbits=2,vbits=2,group=96,residual=32", 128, 4},
           {"kivi4_G64_d80_g8", "kivi:kbits=4,vbits=4,group=64,residual=64", 80, 8},
           {"kivi2_G128_d256_g2", "kivi:kbits=2,vbits=2,group=128", 256, 2},
           // ratequant: its inner quantizer at the layer's width (layer 3: 2 bits, 4 on the others).
           {"ratequant_kivi_d128_g4", "ratequant:bits=4/4/4/2+kivi", 128, 4},
           {"ratequant_tq_d96_g8", "ratequant:bits=4/4/4/2+turboquant_mse", 96, 8},
           // kvquant_nuq beside its defaults: 6 sparse entries of 128, none (the sink's slot
           // alone), no sink at all, and 8-bit codes.
           {"kvquant3_O5pct_d128_g4", "kvquant_nuq:bits=3,outliers=0.05", 128, 4},
           {"kvquant2_O0_d64_g8", "kvquant_nuq:bits=2,outliers=0", 64, 8},
           {"kvquant4_nosink_d96_g2", "kvquant_nuq:bits=4,sink=false", 96, 2},
           {"kvquant8_d80_g4", "kvquant_nuq:bits=8", 80, 4},
           // kitty (its bit parameters cannot all take one width, so none is generated): the
           // defaults at every head size, 4-bit keys boosted to 8, no boosted channel, half of
           // them, groups of 64, 96 (dense value codes) and 128, and a window with capped scores.
           {"kitty_d64_g8", "kitty", 64, 8},
           {"kitty_B25_d80_g2", "kitty:boost=0.25", 80, 2},
           {"kitty_V4_d96_g1", "kitty:vbits=4", 96, 1},
           {"kitty_d128_g4", "kitty", 128, 4},
           {"kitty_d256_g4", "kitty", 256, 4},
           {"kitty4_H8_V4_G64_R64_d128_g8", "kitty:bits=4,high_bits=8,vbits=4,group=64,residual=64", 128, 8},
           {"kitty_B0_d128_g2", "kitty:boost=0", 128, 2},
           {"kitty_B50_d64_g4", "kitty:boost=0.5", 64, 4},
           {"kitty_G96_R32_d128_g4", "kitty:group=96,residual=32", 128, 4},
           {"kitty_G128_V4_d128_g2_window100_cap", "kitty:group=128,vbits=4", 128, 2, 100, 5.0f}})
    cases.push_back(c);
  return cases;
}

// Without a GPU every test is skipped, so that the README's test command passes on CPU machines
// that build the backend; bench/cuda/run_h200.sh sets VELOXQUANT_REQUIRE_GPU=1, where a missing
// device is a failure instead.
class DeviceRequired : public testing::Environment {
 public:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) return;
    const char* required = std::getenv("VELOXQUANT_REQUIRE_GPU");
    if (required && std::strcmp(required, "1") == 0) FAIL() << "no CUDA device, and VELOXQUANT_REQUIRE_GPU=1";
    GTEST_SKIP() << "no CUDA device; these tests run on the GPU machine (bench/cuda/run_h200.sh)";
  }
};
const testing::Environment* const kDeviceRequired = testing::AddGlobalTestEnvironment(new DeviceRequired);

class CacheParity : public testing::TestWithParam<Case> {
 public:
  // The table's header, once before the suite's rows (the other suites print their own tables).
  static void SetUpTestSuite() {
    std::printf("\n| case | code bytes | differing | tail differing | sign bits differing | err vs CPU | err vs CPU-decoded GPU codes | causal prompt err | bound | all written | result |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n");
  }
};

TEST_P(CacheParity, MatchesTheCpuCache) {
  const Case& k = GetParam();
  const vq::Spec spec = vq::parse_spec(k.spec);
  const vc::Support support = vc::supports(spec, layer_shape(k));
  if (!support) {
    std::printf("| %s | refused: %s | | | | | | | | | skip |\n", k.name.c_str(), support.reason.c_str());
    GTEST_SKIP() << support.reason;
  }
  // Each case its own draw, so that one case's inputs do not depend on which ran before it.
  std::seed_seq seed(k.name.begin(), k.name.end());
  std::mt19937 gen(seed);
  const Result r = run_case(k, gen);
  const double bound = bound_for(vc::device_cache_config(spec, layer_shape(k), 1, 1).format);
  const bool pass = r.code_diff == 0 && r.tail_diff == 0 && r.sign_diff * 10000 <= r.sign_bits &&
                    r.err_cpu <= bound && r.err_restored <= bound && r.err_causal <= bound && r.all_written;
  const std::string signs = r.sign_bits ? std::to_string(r.sign_diff) + " of " + std::to_string(r.sign_bits) : "-";
  std::printf("| %s | %zu | %zu | %zu | %s | %.2e | %.2e | %.2e | %.0e | %s | %s |\n", k.name.c_str(), r.code_bytes,
              r.code_diff, r.tail_diff, signs.c_str(), r.err_cpu, r.err_restored, r.err_causal, bound,
              r.all_written ? "yes" : "NO", pass ? "pass" : "FAIL");
  std::fflush(stdout);
  EXPECT_EQ(r.code_diff, 0u);
  EXPECT_EQ(r.tail_diff, 0u);
  EXPECT_LE(r.sign_diff * 10000, r.sign_bits);
  EXPECT_LE(r.err_cpu, bound);
  EXPECT_LE(r.err_restored, bound);
  EXPECT_LE(r.err_causal, bound);
  EXPECT_TRUE(r.all_written);
}

INSTANTIATE_TEST_SUITE_P(Registry, CacheParity, testing::ValuesIn(generated_cases()),
                         [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(VectorQuantizationParity, MatchesTheCpuCodecs) {
  std::mt19937 gen(20261130);
  EXPECT_TRUE(run_vq_parity(gen));
}

TEST(SamplerParity, MatchesTheHostSampler) {
  std::mt19937 gen(20261201);
  EXPECT_TRUE(run_sampler_parity(gen));
}

}  // namespace
