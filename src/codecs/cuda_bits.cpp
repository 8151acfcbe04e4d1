#include "codecs/cuda_bits.h"

#include <fmt/format.h>

#include "veloxquant/error.h"

namespace veloxquant {

unsigned cuda_equal_bits(const std::string& method, const Params& p, const char* key_param, const char* value_param) {
  const long k = p.get_int(key_param), v = p.get_int(value_param);
  if (k != v) {
    throw SpecError(fmt::format("{}: {}={} and {}={}; the CUDA backend stores keys and values with "
                                "one bit width: set them equal",
                                method, key_param, k, value_param, v));
  }
  return static_cast<unsigned>(k);
}

}  // namespace veloxquant
