#include "runtime/model/uniform_layers.h"

#include <fmt/format.h>

#include "veloxquant/error.h"

namespace veloxquant::runtime {

void require_uniform_layers(const ModelConfig& c, std::string_view what, std::string_view needs) {
  if (c.uniform_layers()) return;
  throw Error(fmt::format("{}: {} model '{}' has layers of different shapes or shared-KV layers, and {}; "
                          "expected a model whose {} layers all have {} KV heads of {} and their own caches",
                          what, c.architecture, c.name, needs, c.layers, c.kv_heads, c.head_dim));
}

}  // namespace veloxquant::runtime
