// Fuzz target: every registered method's key and value codecs, built with parameters and a head
// dimension taken from the input, then
//  - decode, score and accumulate on arbitrary code bytes of the right length (codes come from
//    files and other processes: no byte pattern may crash or read out of bounds), and
//  - encode of finite vectors within the fp16 range (the cache's contract, docs/reliability.md)
//    from the input, whose decode must be finite and whose fused score/accumulate must agree with
//    the decode-then-compute reference.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "eval/synthetic_kv.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

namespace {

using veloxquant::Codec;

// Head sizes of real models plus odd ones the fast layouts do not fit.
constexpr std::array<size_t, 9> kDims = {8, 16, 24, 32, 48, 64, 80, 96, 128};
// Keeps one input's work small: at most this many encoded tokens per call.
constexpr size_t kMaxTokens = 512;
constexpr float kFp16Max = 65504.0f;

std::vector<std::pair<std::string, std::string>> fuzzed_args(
    const std::vector<veloxquant::ParamDef>& defs, FuzzedDataProvider& in) {
  std::vector<std::pair<std::string, std::string>> args;
  for (const auto& p : defs) {
    // The residual window belongs to the cache, not the codecs: varying it adds nothing here.
    if (p.name == "residual" || !in.ConsumeBool()) continue;  // else keep the default
    std::string value;
    switch (p.type) {
      case veloxquant::ParamType::Int: {
        // The bounds, the default and the powers of two between them: few enough configurations
        // that cached_codecs() mostly hits, and the values layouts are sensitive to.
        const long lo = static_cast<long>(p.min), hi = static_cast<long>(p.max);
        std::vector<long> candidates = {lo, hi, static_cast<long>(p.default_value)};
        for (long v = 1; v < hi; v *= 2) {
          if (v > lo) candidates.push_back(v);
        }
        value = std::to_string(candidates[in.ConsumeIntegralInRange<size_t>(0, candidates.size() - 1)]);
        break;
      }
      case veloxquant::ParamType::Float:
        value = std::to_string(in.ConsumeFloatingPointInRange<double>(p.min, p.max));
        break;
      case veloxquant::ParamType::Bool:
        value = in.ConsumeBool() ? "true" : "false";
        break;
      case veloxquant::ParamType::Choice:
        value = p.choices[in.ConsumeIntegralInRange<size_t>(0, p.choices.size() - 1)];
        break;
      case veloxquant::ParamType::Text:
        continue;  // a directory of calibration artifacts: nothing a fuzzer could make up

    }
    args.emplace_back(p.name, value);
  }
  return args;
}

// Relative agreement of a fused result with the reference, scaled by the magnitudes involved.
bool close(const std::vector<float>& fused, const std::vector<float>& reference, float magnitude) {
  for (size_t i = 0; i < fused.size(); ++i) {
    if (!(std::fabs(fused[i] - reference[i]) <= 1e-3f * magnitude + 1e-3f)) return false;
  }
  return true;
}

void check_fused_paths(const Codec& codec, const std::vector<uint8_t>& codes, size_t n,
                       const std::vector<float>& decoded) {
  const size_t d = codec.dim(), nq = 2;
  float max_abs = 0;
  for (float x : decoded) {
    if (!std::isfinite(x)) __builtin_trap();  // decode of encoded finite input must be finite
    max_abs = std::max(max_abs, std::fabs(x));
  }
  std::vector<float> q(nq * d), w(nq * n, 1.0f / static_cast<float>(n));
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::sin(static_cast<float>(i) * 0.37f);
  std::vector<float> fused(nq * n), reference(nq * n);
  codec.score(q.data(), nq, codes.data(), n, fused.data());
  codec.Codec::score(q.data(), nq, codes.data(), n, reference.data());
  // A codec that selects tokens (rabitq's nprobe: Codec::select) scores only those, and
  // kExcluded the rest.
  std::vector<uint8_t> keep(nq * n);
  codec.select(q.data(), nq, codes.data(), n, keep.data());
  for (size_t i = 0; i < keep.size(); ++i) {
    if (!keep[i]) reference[i] = veloxquant::kExcluded;
  }
  if (!close(fused, reference, max_abs * static_cast<float>(d))) __builtin_trap();
  std::vector<float> out(nq * d, 0.0f), out_reference(nq * d, 0.0f);
  codec.accumulate(w.data(), nq, codes.data(), n, out.data());
  codec.Codec::accumulate(w.data(), nq, codes.data(), n, out_reference.data());
  if (!close(out, out_reference, max_abs)) __builtin_trap();
}

void fuzz_codec(const Codec& prototype, FuzzedDataProvider& in) {
  const size_t d = prototype.dim(), block = prototype.block_tokens();
  const size_t blocks = std::max<size_t>(1, std::min<size_t>(in.ConsumeIntegralInRange<size_t>(1, 3), kMaxTokens / block));
  const size_t n = blocks * block;
  // Codecs fitted per stream (svdq, palu) are fitted to a fixed smooth prompt first.
  std::vector<float> prompt(n * d);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = std::sin(static_cast<float>(i) * 0.11f) * 3.0f;
  const std::shared_ptr<const Codec> fitted = veloxquant::codec_for_stream(prototype, prompt.data(), n);
  const Codec& codec = *fitted;
  if (in.ConsumeBool()) {
    // Arbitrary code bytes, as a damaged session file would bring them: encoded_bytes and
    // check_codes may refuse them with veloxquant::Error (KVCache::restore does exactly that);
    // codes they accept must decode, score and accumulate without a crash or a sanitizer report.
    // A variable-length codec's blocks may end anywhere, so its buffer keeps the length drawn.
    std::vector<uint8_t> codes = in.ConsumeBytes<uint8_t>(codec.code_bytes(n));
    if (!codec.variable_length()) codes.resize(codec.code_bytes(n));
    try {
      codec.encoded_bytes(codes.data(), n, codes.size());
      codec.check_codes(codes.data(), n);
    } catch (const veloxquant::Error&) {
      return;
    }
    std::vector<float> x(n * d), q(d, 0.5f), scores(n), w(n, 1.0f), out(d, 0.0f);
    codec.decode(codes.data(), n, x.data());
    codec.score(q.data(), 1, codes.data(), n, scores.data());
    codec.accumulate(w.data(), 1, codes.data(), n, out.data());
    return;
  }
  // Finite vectors within the fp16 range, with runs of zeros and of extreme values likely.
  std::vector<float> x(n * d);
  const float scale = in.ConsumeBool() ? kFp16Max : in.ConsumeFloatingPointInRange<float>(0, 4);
  for (float& v : x) {
    const uint8_t kind = in.ConsumeIntegral<uint8_t>();
    v = kind < 64 ? 0.0f : kind < 96 ? (kind & 1 ? kFp16Max : -kFp16Max)
                                     : scale * (static_cast<float>(kind) - 176.0f) / 80.0f;
  }
  std::vector<uint8_t> codes(codec.code_bytes(n));
  codec.encode(x.data(), n, codes.data());
  std::vector<float> decoded(n * d);
  codec.decode(codes.data(), n, decoded.data());
  check_fused_paths(codec, codes, n, decoded);
}

// Building codecs draws rotations, sketches and codebooks, which costs far more than one input's
// work; inputs mostly repeat a few configurations, so the last ones built are kept.
const veloxquant::LayerCodecs& cached_codecs(const veloxquant::Spec& spec, size_t dim, uint64_t seed) {
  static std::map<std::string, veloxquant::LayerCodecs> cache;
  const std::string key = spec.to_string() + " dim=" + std::to_string(dim) + " seed=" + std::to_string(seed);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  if (cache.size() >= 64) cache.clear();  // bounds memory: a 4096-bit QJL sketch is 2 MB
  // A calibrated method gets tables fitted to a synthetic draw, so that its codes are fuzzed too.
  return cache[key] = spec.method->make(
             spec.params, veloxquant::with_synthetic_calibration(spec, veloxquant::LayerShape{1, dim, 0, seed}));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const auto& methods = veloxquant::registered_methods();
  const auto& method = methods[in.ConsumeIntegralInRange<size_t>(0, methods.size() - 1)];
  const size_t dim = kDims[in.ConsumeIntegralInRange<size_t>(0, kDims.size() - 1)];
  const uint64_t seed = in.ConsumeIntegralInRange<uint64_t>(0, 3);
  const veloxquant::LayerCodecs* codecs = nullptr;
  try {
    veloxquant::Spec spec;
    spec.method = &method;
    spec.params = veloxquant::resolve_params(method.name, method.params, fuzzed_args(method.params, in));
    codecs = &cached_codecs(spec, dim, seed);
  } catch (const veloxquant::Error&) {
    return 0;  // a parameter combination the method refuses, with a message
  }
  fuzz_codec(in.ConsumeBool() ? *codecs->key : *codecs->value, in);
  return 0;
}
