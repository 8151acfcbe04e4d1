// Fuzz target: the method spec parser on arbitrary text. A spec either parses, and then its
// canonical text parses back to the same spec and builds a layer's cache (codecs and eviction
// policy), or it throws SpecError; any other outcome is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/method.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  veloxquant::Spec spec;
  try {
    spec = veloxquant::parse_spec(text);
  } catch (const veloxquant::SpecError&) {
    return 0;
  }
  // spec() must round-trip (DESIGN.md): a canonical text that does not parse back is a bug.
  if (!(veloxquant::parse_spec(spec.to_string()) == spec)) __builtin_trap();
  try {
    // A small head: every accepted parameter combination must build a cache or be refused cleanly.
    (void)veloxquant::KVCache(spec, veloxquant::LayerShape{1, 16, 0, 0});
  } catch (const veloxquant::Error&) {
  }
  return 0;
}
