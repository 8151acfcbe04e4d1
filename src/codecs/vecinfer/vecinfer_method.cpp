#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string>

#include "codecs/common/artifacts_param.h"
#include "codecs/common/turboquant_values.h"
#include "codecs/vecinfer/method.h"
#include "codecs/vecinfer/vecinfer_cuda.h"
#include "codecs/vecinfer/vecinfer_fit.h"
#include "codecs/vecinfer/vecinfer_key_codec.h"
#include "core/rng.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"
#include "veloxquant/tensor.h"

namespace veloxquant {
namespace {

constexpr const char* kName = "vecinfer";
// The k-means seeding's seed, mixed with the KV head and the sub-space.
constexpr uint64_t kCodebookSeed = 0x636f6465626f6f6b;  // "codebook"

struct PqShape {
  size_t dims, centroids;
  bool smooth;
};

// The spec's product-VQ shape for keys of head_dim d; throws SpecError when dims does not divide d.
PqShape pq_shape(const Params& p, size_t d) {
  const auto dims = static_cast<size_t>(p.get_int("dims"));
  if (d % dims != 0) {
    throw SpecError(fmt::format("{}: dims={} does not divide head_dim {}; expected a sub-vector "
                                "length that cuts the head into whole sub-vectors", kName, dims, d));
  }
  return {dims, static_cast<size_t>(p.get_int("centroids")), p.get_bool("smooth")};
}

LayerCalibration fit(const Params& p, const CalibrationSamples& s) {
  const PqShape pq = pq_shape(p, s.head_dim);
  LayerCalibration out;
  out.heads.resize(s.kv_heads);
  for (size_t h = 0; h < s.kv_heads; ++h) {
    vecinfer::FittedHead f = vecinfer::fit_head(s.keys.data() + h * s.head_dim, s.tokens, s.kv_heads * s.head_dim,
                                                s.head_dim, pq.dims, pq.centroids, pq.smooth,
                                                derive_seed(kCodebookSeed, {h}));
    out.heads[h]["key.smooth"] = std::move(f.smooth);
    out.heads[h]["key.codebooks"] = std::move(f.codebooks);
  }
  return out;
}

// A table read back from an artifact, checked the way fit() makes it: smoothing factors finite
// and positive, codebook entries finite fp16 values.
vecinfer::HeadTables tables_from(const LayerCalibration& cal, size_t head, size_t d, const PqShape& pq) {
  const std::span<const float> smooth = cal.table(head, "key.smooth", d);
  const std::span<const float> books = cal.table(head, "key.codebooks", d * pq.centroids);
  for (size_t c = 0; c < d; ++c) {
    if (!(smooth[c] > 0) || !std::isfinite(smooth[c])) {
      throw FormatError(fmt::format("{}: smoothing factor of key channel {} of KV head {} is {}; "
                                    "expected a finite value > 0", kName, c, head, smooth[c]));
    }
  }
  for (size_t i = 0; i < books.size(); ++i) {
    if (!std::isfinite(books[i]) || f16_to_f32(f32_to_f16(books[i])) != books[i]) {
      throw FormatError(fmt::format("{}: codebook entry {} of KV head {} is {}; expected a finite "
                                    "fp16 value", kName, i, head, books[i]));
    }
  }
  return {{smooth.begin(), smooth.end()}, {books.begin(), books.end()}};
}

// Every KV head's tables of the layer, from the shape's calibration artifact.
std::vector<vecinfer::HeadTables> layer_tables(const Params& p, const LayerShape& s, const PqShape& pq) {
  const LayerCalibration& cal = layer_calibration(kName, p, s);
  std::vector<vecinfer::HeadTables> heads;
  for (size_t h = 0; h < s.kv_heads; ++h) heads.push_back(tables_from(cal, h, s.head_dim, pq));
  return heads;
}

LayerCodecs make(const Params& p, const LayerShape& s) {
  if (s.head_dim < 2) {
    throw SpecError(fmt::format("{}: head_dim {}; expected >= 2 (turboquant_mse values rotate "
                                "vectors of at least two coordinates)", kName, s.head_dim));
  }
  const PqShape pq = pq_shape(p, s.head_dim);
  LayerCodecs c;
  c.key = std::make_unique<vecinfer::VecinferKeyCodec>(s.head_dim, pq.dims, pq.centroids,
                                                       layer_tables(p, s, pq));
  c.value = turboquant_values(p, s);
  return c;
}

// The GPU form: the calibrated tables when the shape carries the artifact; without it (a question
// about the shape alone, as `veloxquant methods` asks) the settings are checked and no table is
// loaded, and a cache built so is refused, as on the CPU, for want of its calibration.
std::string cuda_config(const Params& p, const LayerShape& s, cuda::CacheConfig& c) {
  const PqShape pq = pq_shape(p, s.head_dim);
  const auto vbits = static_cast<unsigned>(p.get_int("vbits"));
  const std::vector<vecinfer::HeadTables> heads = s.calibration ? layer_tables(p, s, pq)
                                                                : std::vector<vecinfer::HeadTables>{};
  return vecinfer::cuda_config(pq.dims, pq.centroids, vbits, heads, s, c);
}

}  // namespace

MethodInfo vecinfer_method() {
  MethodInfo m;
  m.name = kName;
  m.family = "vecinfer";
  m.paper = "Yao et al., VecInfer: Efficient LLM Inference with Low-Bit KV Cache via "
            "Outlier-Suppressed Vector Quantization, arXiv 2510.06175";
  m.summary = "keys: per-channel smoothing and a Hadamard rotation, then product VQ with k-means "
              "codebooks, scored by table lookups (calibrated); values: turboquant_mse";
  m.params = {
      ParamDef::integer("dims", 8, 1, 64, "key sub-vector length (must divide head_dim)"),
      ParamDef::integer("centroids", 256, 2, 256, "k-means centroids per key sub-space (one index byte)"),
      ParamDef::boolean("smooth", true,
                        "divide key channels by sqrt(max |K_c|) before the rotation "
                        "(false: rotation alone, the paper's ablation)"),
      ParamDef::integer("vbits", 4, 1, 8, "value bits per coordinate (turboquant_mse)"),
      artifacts_param(true),
  };
  m.make = make;
  m.fit = fit;
  m.cuda_config = cuda_config;
  return m;
}

}  // namespace veloxquant
