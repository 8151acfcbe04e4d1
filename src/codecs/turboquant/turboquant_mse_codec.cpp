#include "codecs/turboquant/turboquant_mse_codec.h"

#include <bit>

#include "codecs/turboquant/nearest_level.h"

namespace veloxquant::turboquant {

TurboQuantMseCodec::TurboQuantMseCodec(size_t dim, unsigned bits, uint64_t rotation_seed)
    : TurboQuantMseCodec(dim, lloyd_max_sphere_coordinate(bits, dim), rotation_seed) {}

TurboQuantMseCodec::TurboQuantMseCodec(size_t dim, const ScalarCodebook& codebook,
                                       uint64_t rotation_seed)
    : RotatedTableCodec(dim, static_cast<unsigned>(std::countr_zero(codebook.centroids.size())),
                        codebook.centroids, rotation_seed,
                        codebook.centroids.size() * sizeof(float)),
      codebook_(codebook) {}

void TurboQuantMseCodec::choose_codes(const float* y, uint8_t* codes) const {
  nearest_levels(codebook_, y, dim(), codes);
}

}  // namespace veloxquant::turboquant
