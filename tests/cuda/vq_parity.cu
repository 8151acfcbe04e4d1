// Parity of the vector-quantization kernels with the CPU codecs, on fresh random keys (normal, a
// few outlier channels) and queries:
//  - vq_assign: the codes of VecinferKeyCodec::encode for the same keys, the kernel given them
//    smoothed and rotated as the codec does first (vecinfer::transform_keys). The CPU measures
//    distances in double, the GPU in f32, so a code may differ where the two nearest centroids'
//    distances lie within f32 rounding of each other: every differing code is checked in double
//    and counted as such a tie when the distances differ by at most kTieTolerance relative; ties
//    may be at most 1 in 10^4 codes, any other difference fails.
//  - vq_adc_scores: VecinferKeyCodec::score for the CPU's codes, the kernel given the queries
//    folded as the codec folds them (vecinfer::transform_queries). Tables and sums are formed in
//    the codec's order without contraction: the scores must agree to kAdcBound, normalized.
//  - rabitq_scores: RabitqKeyCodec::score (IVF fitted to the keys). The centroid term is formed in
//    the CPU's order; the sign term sums per byte and then over bytes where the CPU sums SIMD
//    lanes, so it agrees to rounding: kRabitqBound, normalized.
//  - comm_vq_gather_rope: comm_vq::decode_sum of each token's codes, then apply_rope at its
//    position, as the CPU cache reads CommVQ keys. The sum is formed in the same order; the
//    angles' sine and cosine come from CUDA's double sincos rather than the C library's, which
//    may differ in the last bit of a double: kCommVqBound, normalized.
// Score outputs are poisoned with NaN and every element must be finite; codes are written twice,
// over poisons 0x00 and 0xFF, and must agree (a code left unwritten would differ).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "codecs/comm_vq/comm_vq_key_codec.h"
#include "codecs/rabitq/rabitq_key_codec.h"
#include "codecs/vecinfer/key_transform.h"
#include "codecs/vecinfer/vecinfer_key_codec.h"
#include "core/rotation.h"
#include "parity_util.h"
#include "veloxquant/cuda_vq.h"
#include "veloxquant/rope.h"
#include "veloxquant/tensor.h"
#include "vq_parity.h"

namespace vq = veloxquant;
namespace vc = veloxquant::cuda;
using vc::parity::DeviceBuffer;

namespace {

constexpr size_t kKvHeads = 2, kTokens = 3001;  // not a multiple of any block's threads
// Each f32 distance is a sum of at most 16 rounded squares: relative error below 16 * 2^-24 ~ 1e-6.
constexpr double kTieTolerance = 4e-6;
constexpr double kAdcBound = 1e-6, kRabitqBound = 1e-5, kCommVqBound = 1e-6;
constexpr uint64_t kRabitqRotationSeed = 7, kRabitqClusterSeed = 11;

struct Case {
  std::string name;
  bool rabitq;
  size_t dim, dims, centroids, group;  // rabitq: centroids is nlist, dims unused
};

struct Outcome {
  size_t codes = 0, differing = 0, ties = 0;
  double err = 0, max_abs = 0, bound = 0;
  bool all_written = true;
};

// Keys of one KV head, [tokens, dim], with outlier channels.
std::vector<float> random_keys(std::mt19937& gen, size_t tokens, size_t dim) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> k(tokens * dim);
  for (size_t i = 0; i < k.size(); ++i) k[i] = normal(gen) * (i % dim % 16 == 3 ? 6.0f : 1.0f);
  return k;
}

std::vector<float> random_normal(std::mt19937& gen, size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(gen);
  return x;
}

double squared_distance(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return s;
}

// Scores: poisoned, then checked finite and compared.
void compare_scores(const std::vector<float>& gpu, const std::vector<float>& cpu, Outcome& o) {
  for (size_t i = 0; i < gpu.size(); ++i) {
    o.all_written = o.all_written && std::isfinite(gpu[i]);
    o.max_abs = std::max(o.max_abs, std::fabs(double(gpu[i]) - cpu[i]));
  }
  o.err = std::max(o.err, vc::parity::normalized_error(gpu, cpu));
}

Outcome run_vecinfer(const Case& k, std::mt19937& gen) {
  const size_t d = k.dim, S = d / k.dims, C = k.centroids, G = k.group;
  const vq::Rotation rotation = vq::vecinfer::key_rotation(d);
  std::vector<std::vector<float>> keys, transformed;
  std::vector<vq::vecinfer::HeadTables> tables;
  for (size_t h = 0; h < kKvHeads; ++h) {
    keys.push_back(random_keys(gen, kTokens, d));
    vq::vecinfer::HeadTables t;
    t.smooth = vq::vecinfer::smoothing_factors(keys[h].data(), kTokens, d, d);
    std::vector<float> y = keys[h];
    vq::vecinfer::transform_keys(rotation, t.smooth, y.data(), kTokens);
    // Codebooks as k-means leaves them: near the data (sub-vectors of random tokens plus a little
    // noise), fp16 values like the codec's stream state.
    std::uniform_int_distribution<size_t> token(0, kTokens - 1);
    std::normal_distribution<float> noise(0.0f, 0.05f);
    t.codebooks.resize(S * C * k.dims);
    for (size_t s = 0; s < S; ++s)
      for (size_t j = 0; j < C; ++j) {
        const float* from = y.data() + token(gen) * d + s * k.dims;
        for (size_t c = 0; c < k.dims; ++c)
          t.codebooks[(s * C + j) * k.dims + c] = vq::f16_to_f32(vq::f32_to_f16(from[c] + noise(gen)));
      }
    transformed.push_back(std::move(y));
    tables.push_back(std::move(t));
  }
  const vq::vecinfer::VecinferKeyCodec prototype(d, k.dims, C, tables);
  const auto states = prototype.fit_streams(nullptr, 0, kKvHeads);

  Outcome o;
  o.bound = kAdcBound;
  const vc::ScoreShape shape{kKvHeads, G, kTokens, d};
  std::vector<uint8_t> all_codes;
  std::vector<float> folded, books, cpu_scores;
  for (size_t h = 0; h < kKvHeads; ++h) {
    const auto codec = prototype.with_states(states, h);
    std::vector<uint8_t> cpu(kTokens * S);
    codec->encode(keys[h].data(), kTokens, cpu.data());
    DeviceBuffer<float> x(transformed[h]), book(tables[h].codebooks);
    DeviceBuffer<uint8_t> codes(cpu.size());
    std::vector<uint8_t> gpu[2];
    for (int poison : {0x00, 0xFF}) {
      VQ_CUDA_CHECK(cudaMemset(codes.ptr, poison, cpu.size()));
      vc::vq_assign(x.ptr, kTokens, d, book.ptr, k.dims, C, codes.ptr);
      VQ_CUDA_CHECK(cudaDeviceSynchronize());
      gpu[poison ? 1 : 0] = codes.download();
    }
    o.all_written = o.all_written && gpu[0] == gpu[1];
    o.codes += cpu.size();
    for (size_t i = 0; i < cpu.size(); ++i) {
      if (gpu[0][i] == cpu[i]) continue;
      const float* sub = transformed[h].data() + i / S * d + i % S * k.dims;
      const float* base = tables[h].codebooks.data() + i % S * C * k.dims;
      const double dg = squared_distance(sub, base + gpu[0][i] * k.dims, k.dims);
      const double dc = squared_distance(sub, base + cpu[i] * k.dims, k.dims);
      (gpu[0][i] < C && std::fabs(dg - dc) <= kTieTolerance * dc ? o.ties : o.differing) += 1;
    }
    // ADC over the CPU's codes, for the folded queries.
    std::vector<float> q = random_normal(gen, G * d), scores(G * kTokens);
    codec->score(q.data(), G, cpu.data(), kTokens, scores.data());
    vq::vecinfer::transform_queries(rotation, tables[h].smooth, q.data(), G);
    folded.insert(folded.end(), q.begin(), q.end());
    books.insert(books.end(), tables[h].codebooks.begin(), tables[h].codebooks.end());
    all_codes.insert(all_codes.end(), cpu.begin(), cpu.end());
    cpu_scores.insert(cpu_scores.end(), scores.begin(), scores.end());
  }
  DeviceBuffer<float> dq(folded), dbooks(books), dscores(cpu_scores.size());
  DeviceBuffer<uint8_t> dcodes(all_codes);
  VQ_CUDA_CHECK(cudaMemset(dscores.ptr, 0xFF, cpu_scores.size() * sizeof(float)));  // NaN
  vc::vq_adc_scores(dq.ptr, dbooks.ptr, dcodes.ptr, k.dims, C, shape, dscores.ptr);
  VQ_CUDA_CHECK(cudaDeviceSynchronize());
  compare_scores(dscores.download(), cpu_scores, o);
  return o;
}

Outcome run_rabitq(const Case& k, std::mt19937& gen) {
  const size_t d = k.dim, G = k.group, nlist = k.centroids;
  // The CPU's prefill layout [tokens, kv_heads, dim], which fit_streams reads.
  std::vector<float> interleaved(kTokens * kKvHeads * d);
  std::vector<std::vector<float>> keys;
  for (size_t h = 0; h < kKvHeads; ++h) {
    keys.push_back(random_keys(gen, kTokens, d));
    for (size_t t = 0; t < kTokens; ++t)
      std::copy_n(keys[h].data() + t * d, d, interleaved.data() + (t * kKvHeads + h) * d);
  }
  const vq::rabitq::RabitqKeyCodec prototype(d, nlist, kRabitqRotationSeed, kRabitqClusterSeed);
  const auto states = prototype.fit_streams(interleaved.data(), kTokens, kKvHeads);
  const vq::Rotation rotation(d, kRabitqRotationSeed);  // the codec's P

  std::vector<float> qs, rotated, centroids, cpu_scores;
  std::vector<uint8_t> records;
  for (size_t h = 0; h < kKvHeads; ++h) {
    const auto codec = prototype.with_states(states, h);
    const auto& fitted = dynamic_cast<const vq::rabitq::RabitqKeyCodec&>(*codec);
    std::vector<uint8_t> rec(codec->code_bytes(kTokens));
    codec->encode(keys[h].data(), kTokens, rec.data());
    std::vector<float> q = random_normal(gen, G * d), scores(G * kTokens), pq = q;
    codec->score(q.data(), G, rec.data(), kTokens, scores.data());
    rotation.forward(pq.data(), G);
    qs.insert(qs.end(), q.begin(), q.end());
    rotated.insert(rotated.end(), pq.begin(), pq.end());
    centroids.insert(centroids.end(), fitted.centroids().begin(), fitted.centroids().end());
    records.insert(records.end(), rec.begin(), rec.end());
    cpu_scores.insert(cpu_scores.end(), scores.begin(), scores.end());
  }
  if (records.size() != kKvHeads * kTokens * vc::rabitq_record_bytes(d)) {
    throw vq::Error("rabitq records of " + std::to_string(records.size()) + " bytes; expected " +
                    std::to_string(kKvHeads * kTokens * vc::rabitq_record_bytes(d)));
  }
  DeviceBuffer<float> dq(qs), dpq(rotated), dc(centroids), dscores(cpu_scores.size());
  DeviceBuffer<uint8_t> drec(records);
  VQ_CUDA_CHECK(cudaMemset(dscores.ptr, 0xFF, cpu_scores.size() * sizeof(float)));  // NaN
  vc::rabitq_scores(dq.ptr, dpq.ptr, dc.ptr, nlist, drec.ptr, vc::ScoreShape{kKvHeads, G, kTokens, d}, dscores.ptr);
  VQ_CUDA_CHECK(cudaDeviceSynchronize());
  Outcome o;
  o.bound = kRabitqBound;
  compare_scores(dscores.download(), cpu_scores, o);
  return o;
}

struct CommVqCase {
  std::string name;
  size_t dim, books, entries;
  vq::RopeParams rope;
};

// Random fp16 codebooks (as the codec stores them), codes and positions up to 5e5; the GPU's keys
// against decode_sum and apply_rope per token.
Outcome run_comm_vq(const CommVqCase& k, std::mt19937& gen) {
  const size_t d = k.dim, book_floats = k.books * k.entries * d;
  std::vector<float> books = random_normal(gen, kKvHeads * book_floats);
  for (float& x : books) x = vq::f16_to_f32(vq::f32_to_f16(x));
  std::uniform_int_distribution<int> code(0, static_cast<int>(k.entries) - 1);
  std::uniform_int_distribution<int64_t> position(0, 500000);
  std::vector<uint8_t> codes(kKvHeads * kTokens * k.books);
  for (uint8_t& c : codes) c = static_cast<uint8_t>(code(gen));
  std::vector<int64_t> positions(kTokens);
  for (int64_t& p : positions) p = position(gen);
  std::vector<float> ref(kKvHeads * kTokens * d);
  for (size_t h = 0; h < kKvHeads; ++h)
    for (size_t t = 0; t < kTokens; ++t) {
      float* key = ref.data() + (h * kTokens + t) * d;
      vq::comm_vq::decode_sum(codes.data() + (h * kTokens + t) * k.books, books.data() + h * book_floats, k.books,
                              k.entries, d, key);
      vq::apply_rope(k.rope, key, 1, d, positions[t]);
    }
  DeviceBuffer<uint8_t> dcodes(codes.size());
  DeviceBuffer<float> dbooks(books.size()), out(ref.size());
  DeviceBuffer<int64_t> dpos(positions.size());
  dcodes.upload(codes), dbooks.upload(books), dpos.upload(positions);
  VQ_CUDA_CHECK(cudaMemset(out.ptr, 0xFF, ref.size() * sizeof(float)));  // NaN everywhere
  vc::comm_vq_gather_rope(dcodes.ptr, dbooks.ptr, k.books, k.entries, dpos.ptr, k.rope, kKvHeads, kTokens, d, out.ptr);
  VQ_CUDA_CHECK(cudaGetLastError());
  VQ_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> gpu(ref.size());
  VQ_CUDA_CHECK(cudaMemcpy(gpu.data(), out.ptr, gpu.size() * sizeof(float), cudaMemcpyDeviceToHost));
  Outcome o;
  o.bound = kCommVqBound;
  compare_scores(gpu, ref, o);
  return o;
}

vq::RopeParams rope_of(uint32_t dims, vq::RopeLayout layout) {
  vq::RopeParams r;
  r.dims = dims;
  r.freq_base = 10000.0f;
  r.layout = layout;
  return r;
}

bool run_comm_vq_parity(std::mt19937& gen) {
  const std::vector<CommVqCase> cases = {
      {"comm_vq d128 B4 c256", 128, 4, 256, rope_of(128, vq::RopeLayout::Interleaved)},
      {"comm_vq d128 B8 c64 neox", 128, 8, 64, rope_of(128, vq::RopeLayout::Neox)},
      {"comm_vq d64 B4 c256 half-rope", 64, 4, 256, rope_of(32, vq::RopeLayout::Interleaved)},
      {"comm_vq d64 B2 c16 neox half-rope", 64, 2, 16, rope_of(32, vq::RopeLayout::Neox)},
  };
  bool ok = true;
  std::printf("\n| case | key err (normalized) | max abs err | bound | all written | result |\n");
  std::printf("| --- | ---: | ---: | ---: | --- | --- |\n");
  for (const CommVqCase& k : cases) {
    try {
      const Outcome o = run_comm_vq(k, gen);
      const bool pass = o.err <= o.bound && o.all_written;
      ok = ok && pass;
      std::printf("| %s | %.2e | %.2e | %.0e | %s | %s |\n", k.name.c_str(), o.err, o.max_abs, o.bound,
                  o.all_written ? "yes" : "NO", pass ? "pass" : "FAIL");
    } catch (const std::exception& e) {
      ok = false;
      std::printf("| %s | error: %s | | | | FAIL |\n", k.name.c_str(), e.what());
    }
    std::fflush(stdout);
  }
  return ok;
}

}  // namespace

bool run_vq_parity(std::mt19937& gen) {
  const std::vector<Case> cases = {
      {"vecinfer d128 dims8 c256 g8", false, 128, 8, 256, 8},
      {"vecinfer d128 dims4 c64 g4", false, 128, 4, 64, 4},
      {"vecinfer d128 dims16 c256 g1", false, 128, 16, 256, 1},
      {"vecinfer d64 dims8 c200 g2", false, 64, 8, 200, 2},
      {"rabitq d128 nlist16 g8", true, 128, 0, 16, 8},
      {"rabitq d128 nlist256 g3", true, 128, 0, 256, 3},
      {"rabitq d64 nlist1 g4", true, 64, 0, 1, 4},
  };
  bool ok = true;
  std::printf("| case | codes | differing | f32 ties | score err (normalized) | max abs err | bound | all written | result |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n");
  for (const Case& k : cases) {
    try {
      const Outcome o = k.rabitq ? run_rabitq(k, gen) : run_vecinfer(k, gen);
      const bool pass = o.differing == 0 && o.ties * 10000 <= o.codes && o.err <= o.bound && o.all_written;
      ok = ok && pass;
      const std::string codes = k.rabitq ? "-" : std::to_string(o.codes);
      const std::string diff = k.rabitq ? "-" : std::to_string(o.differing);
      const std::string ties = k.rabitq ? "-" : std::to_string(o.ties);
      std::printf("| %s | %s | %s | %s | %.2e | %.2e | %.0e | %s | %s |\n", k.name.c_str(), codes.c_str(),
                  diff.c_str(), ties.c_str(), o.err, o.max_abs, o.bound, o.all_written ? "yes" : "NO",
                  pass ? "pass" : "FAIL");
    } catch (const std::exception& e) {
      ok = false;
      std::printf("| %s | error: %s | | | | | | | FAIL |\n", k.name.c_str(), e.what());
    }
    std::fflush(stdout);
  }
  return run_comm_vq_parity(gen) && ok;
}
