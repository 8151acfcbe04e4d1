// KITTY on the GPU: keys per channel in blocks of `group` tokens with the block's widest channels
// at more bits, values as KIVI's per-token codes, the newest tokens in fp16 rings.
#include <algorithm>
#include <memory>

#include "cuda/cache/device_format.h"
#include "cuda/kitty/kitty_launch.h"
#include "cuda/kitty/kitty_layout.cuh"
#include "cuda/kitty/kitty_rules.h"
#include "cuda/kivi/kivi_layout.cuh"
#include "veloxquant/error.h"

namespace veloxquant::cuda {
namespace {

class KittyFormat final : public DeviceFormat {
 public:
  KittyFormat(const CacheConfig& c, const KittyTables& t)
      : args_{int(c.group), int(t.key_bits), int(t.high_bits), int(t.boosted)},
        keys_{int(c.head_dim), args_.bits, args_.high_bits, args_.boosted, args_.group},
        values_{int(c.head_dim), int(c.bits), int(std::min(c.group, c.head_dim))} {}
  bool windowed() const override { return true; }
  int key_block() const override { return keys_.group; }
  int value_block() const override { return 4; }
  size_t key_code_bytes(size_t n) const override { return n / keys_.group * keys_.block_bytes(); }
  size_t value_code_bytes(size_t n) const override { return n / 4 * values_.block_bytes(); }
  void append(const AppendParams& p, int batch, cudaStream_t s) const override {
    launch_kitty_append(p, batch, values_.bits, args_, s);
  }
  SplitKernel split_kernel(AttendParams& p) const override {
    p.format.set(args_);
    return kitty_split_kernel(p, values_.bits);
  }

 private:
  KittyArgs args_;
  kitty::KeyLayout keys_;
  kivi::ValueLayout values_;
};

std::unique_ptr<DeviceFormat> make(const CacheConfig& c) {
  if (const std::string problem = kitty_problem(c); !problem.empty()) throw Error("cuda cache: " + problem);
  return std::make_unique<KittyFormat>(c, *tables_of<KittyTables>(c));
}

}  // namespace

VQ_DEVICE_FORMAT(kitty, "kitty", make);

}  // namespace veloxquant::cuda
