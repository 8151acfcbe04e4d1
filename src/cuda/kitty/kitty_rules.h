// What the KITTY kernels run (kitty_format.cu refuses the rest; kitty's CUDA form in
// codecs/kitty/kitty_method.cpp answers cuda::supports() from it). Plain C++.
#pragma once

#include <string>

#include "cuda/cache/config_rules.h"

namespace veloxquant::cuda {

// KITTY's key settings, beside CacheConfig's value bits, group and residual window.
struct KittyTables : FormatTables {
  unsigned key_bits = 2;   // bits of the channels not boosted
  unsigned high_bits = 4;  // bits of the boosted channels
  size_t boosted = 16;     // boosted channels per block of `group` tokens
};

// Every head_dim config_problem() takes; key bits as the CPU method takes them (2 or 4, boosted 4
// or 8); key blocks of whole 32-token tiles, which the append stages whole in shared memory.
inline std::string kitty_problem(const CacheConfig& c) {
  if (std::string p = windowed_problem("kitty", "kitty vbits", c); !p.empty()) return p;
  const KittyTables* t = tables_of<KittyTables>(c);
  if (t == nullptr) return "kitty without its key settings; expected KittyTables";
  if ((t->key_bits != 2 && t->key_bits != 4) || (t->high_bits != 4 && t->high_bits != 8) ||
      t->high_bits <= t->key_bits)
    return "kitty bits " + std::to_string(t->key_bits) + ", high_bits " + std::to_string(t->high_bits) +
           "; expected 2 or 4, and 4 or 8 above them";
  if (t->boosted > c.head_dim)
    return "kitty boosted channels " + std::to_string(t->boosted) + "; expected at most head_dim " +
           std::to_string(c.head_dim);
  return {};
}

}  // namespace veloxquant::cuda
