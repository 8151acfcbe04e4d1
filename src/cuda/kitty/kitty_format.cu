// KITTY on the GPU: keys per channel in blocks of `group` tokens with the block's widest channels
// at more bits, values as KIVI's per-token codes, the newest tokens in fp16 rings.
#include <algorithm>
#include <memory>

#include "cuda/kitty/kitty_launch.h"
#include "cuda/kitty/kitty_layout.cuh"
#include "cuda/kitty/kitty_rules.h"
#include "cuda/kivi/kivi_values_format.h"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

class KittyFormat final : public KiviValuesFormat {
 public:
  KittyFormat(const CacheConfig& c, const KittyArgs& a)
      : KiviValuesFormat(
            a.group, kitty::KeyLayout{int(c.head_dim), a.bits, a.high_bits, a.boosted, a.group}.block_bytes(),
            {int(c.head_dim), int(c.bits), int(std::min(c.group, c.head_dim))}),
        args_(a) {}
  void append(const AppendParams& p, int batch, cudaStream_t s) const override {
    launch_kitty_append(p, batch, values_.bits, args_, s);
  }
  SplitKernel split_kernel(AttendParams& p) const override {
    p.format.set(args_);
    return kitty_split_kernel(p, values_.bits);
  }

 private:
  KittyArgs args_;
};

std::unique_ptr<DeviceFormat> make(const CacheConfig& c) {
  if (const std::string problem = kitty_problem(c); !problem.empty()) throw Error("cuda cache: " + problem);
  const KittyTables& t = *tables_of<KittyTables>(c);
  return std::make_unique<KittyFormat>(c, KittyArgs{int(c.group), int(t.key_bits), int(t.high_bits),
                                                    int(t.boosted)});
}

}  // namespace

VQ_DEVICE_FORMAT(kitty, "kitty", make);

}  // namespace veloxquant::cuda
