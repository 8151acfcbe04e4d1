#include <memory>
#include <string>

#include "codecs/common/artifacts_param.h"
#include "codecs/common/turboquant_values.h"
#include "codecs/rabitq/method.h"
#include "codecs/rabitq/rabitq_key_codec.h"
#include "core/rng.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {
// The k-means seeding's stream tag, after TurboQuantStream's (whose rotations rabitq shares).
constexpr uint64_t kClusterSeedTag = 4;
}  // namespace

MethodInfo rabitq_method() {
  MethodInfo m;
  m.name = "rabitq";
  m.family = "rabitq";
  m.paper = "Gao & Long, RaBitQ: Quantizing High-Dimensional Vectors with a Theoretical Error Bound "
            "for Approximate Nearest Neighbor Search, SIGMOD 2024";
  m.summary = "keys: IVF centroids fitted to each head's prompt keys, 1-bit signs of the randomly "
              "rotated residual with RaBitQ's unbiased inner-product estimator; values: turboquant_mse";
  m.params = {
      ParamDef::integer("nlist", 16, 1, 256, "IVF clusters per KV head (k-means on the prompt's keys)"),
      ParamDef::integer("nprobe", 0, 0, 256,
                        "IVF lists each query reads, those of the largest centroid products (0: every list)"),
      ParamDef::integer("vbits", 4, 1, 8, "value bits per coordinate (turboquant_mse)"),
      artifacts_param(false),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    if (s.head_dim < 2) {
      throw SpecError("rabitq: head_dim " + std::to_string(s.head_dim) +
                      "; expected >= 2 (a sign per rotated coordinate of a unit residual)");
    }
    const long nlist = p.get_int("nlist"), nprobe = p.get_int("nprobe");
    if (nprobe > nlist) {
      throw SpecError("rabitq: nprobe=" + std::to_string(nprobe) + " lists with nlist=" +
                      std::to_string(nlist) + "; expected nprobe <= nlist (0: every list)");
    }
    LayerCodecs c;
    c.key = std::make_unique<rabitq::RabitqKeyCodec>(
        s.head_dim, static_cast<size_t>(nlist), turboquant_stream_seed(s, TurboQuantStream::KeyRotation),
        derive_seed(s.seed, {static_cast<uint64_t>(s.layer), kClusterSeedTag}), static_cast<size_t>(nprobe));
    c.value = turboquant_values(p, s);
    return c;
  };
  return m;
}

}  // namespace veloxquant
