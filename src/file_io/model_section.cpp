// The model identity as files record it, and how two identities differ.
#include "file_io/model_section.h"

#include <fmt/format.h>

namespace veloxquant {

std::string describe_differences(const ModelIdentity& expected, const ModelIdentity& found) {
  std::string out;
  const auto add = [&](std::string_view field, const auto& e, const auto& f) {
    if (e == f) return;
    out += fmt::format("{}{}: expected {}, found {}", out.empty() ? "" : "; ", field, e, f);
  };
  const auto hex = [](uint64_t h) { return fmt::format("0x{:016x}", h); };
  add("architecture", fmt::format("'{}'", expected.architecture), fmt::format("'{}'", found.architecture));
  add("layers", expected.layers, found.layers);
  add("heads", expected.heads, found.heads);
  add("kv_heads", expected.kv_heads, found.kv_heads);
  add("head_dim", expected.head_dim, found.head_dim);
  add("embedding", expected.embedding, found.embedding);
  add("feed_forward", expected.feed_forward, found.feed_forward);
  add("vocab", expected.vocab, found.vocab);
  add("context_length", expected.context_length, found.context_length);
  add("weights hash", hex(expected.weights_hash), hex(found.weights_hash));
  add("tokenizer hash", hex(expected.tokenizer_hash), hex(found.tokenizer_hash));
  return out;
}

namespace file_io {

void put_model(SectionBuilder& s, const ModelIdentity& m) {
  s.put_string(m.architecture);
  for (uint32_t v :
       {m.layers, m.heads, m.kv_heads, m.head_dim, m.embedding, m.feed_forward, m.vocab, m.context_length})
    s.put(v);
  s.put(m.weights_hash);
  s.put(m.tokenizer_hash);
}

ModelIdentity read_model(PayloadReader r) {
  ModelIdentity m;
  m.architecture = r.read_string("the architecture");
  for (uint32_t* field : {&m.layers, &m.heads, &m.kv_heads, &m.head_dim, &m.embedding, &m.feed_forward,
                          &m.vocab, &m.context_length})
    *field = r.read<uint32_t>("the model's shape");
  m.weights_hash = r.read<uint64_t>("the weights hash");
  m.tokenizer_hash = r.read<uint64_t>("the tokenizer hash");
  r.expect_end();
  if (m.layers == 0 || m.kv_heads == 0 || m.head_dim == 0 || m.vocab == 0) {
    throw FormatError(fmt::format("{}: layers {}, kv_heads {}, head_dim {}, vocab {}; expected each "
                                  ">= 1",
                                  r.name(), m.layers, m.kv_heads, m.head_dim, m.vocab));
  }
  return m;
}

}  // namespace file_io
}  // namespace veloxquant
