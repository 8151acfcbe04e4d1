// Registry entries of the TurboQuant family.
#include <memory>
#include <string>

#include "codecs/common/artifacts_param.h"
#include "codecs/common/turboquant_values.h"
#include "codecs/turboquant/method.h"
#include "codecs/turboquant/turboquant_cuda.h"
#include "codecs/turboquant/turboquant_mse_codec.h"
#include "codecs/turboquant/turboquant_prod_codec.h"
#include "codecs/turboquant/turboquant_rvq_codec.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {
using turboquant::TurboQuantMseCodec;
using turboquant::TurboQuantProdCodec;
using turboquant::TurboQuantRvqCodec;

constexpr const char* kPaper =
    "Zandieh, Daliri, Hadian, Mirrokni, TurboQuant: Online Vector Quantization with "
    "Near-optimal Distortion Rate, arXiv 2504.19874";

// The rotated-coordinate codebooks need at least a circle to live on.
void require_dim(const char* method, const LayerShape& s) {
  if (s.head_dim < 2) {
    throw SpecError(std::string(method) + ": head_dim " + std::to_string(s.head_dim) +
                    "; expected >= 2 (a random rotation of a 1-d vector is only a sign)");
  }
}

unsigned param_bits(const Params& p, const char* name) {
  return static_cast<unsigned>(p.get_int(name));
}
}  // namespace

MethodInfo turboquant_mse_method() {
  MethodInfo m;
  m.name = "turboquant_mse";
  m.family = "turboquant";
  m.paper = kPaper;
  m.summary = "random rotation, then a Lloyd-Max codebook per rotated coordinate; norm kept (f32)";
  m.params = {
      ParamDef::integer("bits", 4, 1, 8, "key bits per coordinate"),
      ParamDef::integer("vbits", 4, 1, 8, "value bits per coordinate"),
      artifacts_param(false),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    require_dim("turboquant_mse", s);
    LayerCodecs c;
    c.key = std::make_unique<TurboQuantMseCodec>(s.head_dim, param_bits(p, "bits"),
                                                 turboquant_stream_seed(s, TurboQuantStream::KeyRotation));
    c.value = turboquant_values(p, s);
    return c;
  };
  m.cuda_config = [](const Params& p, const LayerShape& s, cuda::CacheConfig& c) {
    return turboquant::cuda_config(cuda::TurboQuantKind::Mse, p, s, c);
  };
  return m;
}

MethodInfo turboquant_prod_method() {
  MethodInfo m;
  m.name = "turboquant_prod";
  m.family = "turboquant";
  m.paper = kPaper;
  m.summary = "keys: (bits-1)-bit turboquant_mse plus 1-bit QJL of the residual, an unbiased "
              "inner-product estimator; values: turboquant_mse";
  m.params = {
      ParamDef::integer("bits", 4, 1, 8, "key bits per coordinate, one of them the QJL sign"),
      ParamDef::integer("vbits", 4, 1, 8, "value bits per coordinate (turboquant_mse)"),
      artifacts_param(false),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    require_dim("turboquant_prod", s);
    LayerCodecs c;
    c.key = std::make_unique<TurboQuantProdCodec>(s.head_dim, param_bits(p, "bits"),
                                                  turboquant_stream_seed(s, TurboQuantStream::KeyRotation),
                                                  turboquant_stream_seed(s, TurboQuantStream::KeySketch));
    c.value = turboquant_values(p, s);
    return c;
  };
  m.cuda_config = [](const Params& p, const LayerShape& s, cuda::CacheConfig& c) {
    return turboquant::cuda_config(cuda::TurboQuantKind::Prod, p, s, c);
  };
  return m;
}

MethodInfo turboquant_rvq_method() {
  MethodInfo m;
  m.name = "turboquant_rvq";
  m.family = "turboquant";
  m.paper = kPaper + std::string(" (two-stage residual variant)");
  m.summary = "random rotation, then Gaussian and Laplacian Lloyd-Max stages on the residual; "
              "no calibration";
  m.params = {
      ParamDef::integer("bits", 1, 1, 4, "key bits per coordinate per stage (2 stages)"),
      ParamDef::integer("vbits", 1, 1, 4, "value bits per coordinate per stage (2 stages)"),
      artifacts_param(false),
  };
  m.make = [](const Params& p, const LayerShape& s) {
    require_dim("turboquant_rvq", s);
    LayerCodecs c;
    c.key = std::make_unique<TurboQuantRvqCodec>(s.head_dim, param_bits(p, "bits"),
                                                 turboquant_stream_seed(s, TurboQuantStream::KeyRotation));
    c.value = std::make_unique<TurboQuantRvqCodec>(s.head_dim, param_bits(p, "vbits"),
                                                   turboquant_stream_seed(s, TurboQuantStream::ValueRotation));
    return c;
  };
  m.cuda_config = [](const Params& p, const LayerShape& s, cuda::CacheConfig& c) {
    return turboquant::cuda_config(cuda::TurboQuantKind::Rvq, p, s, c);
  };
  return m;
}

}  // namespace veloxquant
