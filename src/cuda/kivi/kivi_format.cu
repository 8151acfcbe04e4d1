// KIVI on the GPU: keys per channel in groups of tokens, values per token in quads, the newest
// tokens in fp16 rings (kivi_layout.cuh gives the bytes, the CPU codec's).
#include <algorithm>
#include <memory>

#include "cuda/kivi/kivi_launch.h"
#include "cuda/kivi/kivi_layout.cuh"
#include "cuda/kivi/kivi_rules.h"
#include "cuda/kivi/kivi_values_format.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

class KiviFormat final : public KiviValuesFormat {
 public:
  explicit KiviFormat(const CacheConfig& c)
      : KiviValuesFormat(int(c.group),
                         kivi::KeyLayout{int(c.head_dim), int(c.bits), int(c.group)}.block_bytes(),
                         {int(c.head_dim), int(c.bits), int(std::min(c.group, c.head_dim))}),
        keys_{int(c.head_dim), int(c.bits), int(c.group)} {}
  void append(const AppendParams& p, int batch, cudaStream_t s) const override {
    launch_kivi_append(p, batch, keys_.bits, keys_.group, s);
  }
  SplitKernel split_kernel(AttendParams& p) const override {
    p.format.set(KiviArgs{keys_.group});
    return kivi_split_kernel(p, keys_.bits);
  }

 private:
  kivi::KeyLayout keys_;
};

std::unique_ptr<DeviceFormat> make(const CacheConfig& c) {
  if (const std::string problem = kivi_problem(c); !problem.empty()) throw Error("cuda cache: " + problem);
  return std::make_unique<KiviFormat>(c);
}

}  // namespace

VQ_DEVICE_FORMAT(kivi, "kivi", make);

}  // namespace veloxquant::cuda
