#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>

#include "codecs/comm_vq/comm_vq_fit.h"
#include "codecs/comm_vq/comm_vq_key_codec.h"
#include "codecs/comm_vq/method.h"
#include "codecs/common/artifacts_param.h"
#include "codecs/common/turboquant_values.h"
#include "core/rng.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant {
namespace {

constexpr const char* kName = "comm_vq";
// The k-means seeding's seed, mixed with the KV head and the codebook.
constexpr uint64_t kCodebookSeed = 0x636f6d6d5f7671;  // "comm_vq"

struct BookShape {
  size_t books, entries;
};

BookShape book_shape(const Params& p) {
  return {static_cast<size_t>(p.get_int("codebooks")), size_t{1} << p.get_int("bits")};
}

LayerCalibration fit(const Params& p, const CalibrationSamples& s) {
  const BookShape b = book_shape(p);
  const auto iterations = static_cast<size_t>(p.get_int("iters"));
  LayerCalibration out;
  out.heads.resize(s.kv_heads);
  for (size_t h = 0; h < s.kv_heads; ++h) {
    comm_vq::FittedHead f = comm_vq::fit_head(s.keys.data() + h * s.head_dim, s.tokens, s.kv_heads * s.head_dim,
                                              s.head_dim, b.books, b.entries, iterations,
                                              derive_seed(kCodebookSeed, {h}));
    out.heads[h]["key.codebooks"] = std::move(f.codebooks);
  }
  return out;
}

// A head's codebooks read back from an artifact, checked the way fit() makes them: finite fp16
// values.
comm_vq::Codebooks codebooks_from(const LayerCalibration& cal, size_t head, size_t d, const BookShape& b) {
  const std::span<const float> books = cal.table(head, "key.codebooks", b.books * b.entries * d);
  for (size_t i = 0; i < books.size(); ++i) {
    if (!std::isfinite(books[i]) || f16_to_f32(f32_to_f16(books[i])) != books[i]) {
      throw FormatError(fmt::format("{}: codebook value {} of KV head {} is {}; expected a finite "
                                    "fp16 value", kName, i, head, books[i]));
    }
  }
  return {books.begin(), books.end()};
}

LayerCodecs make(const Params& p, const LayerShape& s) {
  if (s.head_dim < 2) {
    throw SpecError(fmt::format("{}: head_dim {}; expected >= 2 (turboquant_mse values rotate "
                                "vectors of at least two coordinates)", kName, s.head_dim));
  }
  const BookShape b = book_shape(p);
  const LayerCalibration& cal = layer_calibration(kName, p, s);
  std::vector<comm_vq::Codebooks> heads;
  for (size_t h = 0; h < s.kv_heads; ++h) heads.push_back(codebooks_from(cal, h, s.head_dim, b));
  LayerCodecs c;
  c.key = std::make_unique<comm_vq::CommVqKeyCodec>(s.head_dim, b.books, b.entries, std::move(heads));
  c.value = turboquant_values(p, s);
  return c;
}

}  // namespace

MethodInfo comm_vq_method() {
  MethodInfo m;
  m.name = kName;
  m.family = "comm_vq";
  m.paper = "Li et al., CommVQ: Commutative Vector Quantization for KV Cache Compression, "
            "ICML 2025, arXiv 2506.18879";
  m.summary = "keys before RoPE: additive (residual) VQ over the whole head with RoPE-commutative "
              "codebooks trained by EM (calibrated), rotated to their positions at attend time; "
              "values: turboquant_mse";
  m.params = {
      ParamDef::integer("codebooks", 4, 1, 16, "additive key codebooks (one index each per key)"),
      ParamDef::integer("bits", 8, 1, 8,
                        "bits per codebook index (2^bits codewords, the first the origin; one byte)"),
      ParamDef::integer("iters", 10, 0, 100, "EM rounds after seeding each codebook with residual rows"),
      ParamDef::integer("vbits", 4, 1, 8, "value bits per coordinate (turboquant_mse)"),
      artifacts_param(true),
  };
  m.make = make;
  m.fit = fit;
  m.keys_before_rope = true;
  return m;
}

}  // namespace veloxquant
