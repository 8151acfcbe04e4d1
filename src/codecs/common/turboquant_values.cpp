#include "codecs/common/turboquant_values.h"

#include "codecs/turboquant/turboquant_mse_codec.h"
#include "core/rng.h"
#include "veloxquant/spec.h"

namespace veloxquant {

std::unique_ptr<Codec> turboquant_values(const Params& p, const LayerShape& s) {
  return std::make_unique<turboquant::TurboQuantMseCodec>(
      s.head_dim, static_cast<unsigned>(p.get_int("vbits")),
      turboquant_stream_seed(s, TurboQuantStream::ValueRotation));
}

uint64_t turboquant_stream_seed(const LayerShape& shape, TurboQuantStream stream) {
  return derive_seed(shape.seed, {static_cast<uint64_t>(shape.layer), static_cast<uint64_t>(stream)});
}

}  // namespace veloxquant
