// The model identity payload, shared by session files and calibration artifacts.
#include "runtime/session_file/sections.h"

namespace veloxquant::session_file {

void put_model(SectionBuilder& s, const ModelIdentity& m) {
  s.put_string(m.architecture);
  for (uint32_t v : {m.layers, m.heads, m.kv_heads, m.head_dim, m.embedding, m.feed_forward,
                     m.vocab, m.context_length})
    s.put(v);
  s.put(m.weights_hash);
  s.put(m.tokenizer_hash);
}

ModelIdentity read_model(PayloadReader r) {
  ModelIdentity m;
  m.architecture = r.read_string("the architecture");
  for (uint32_t* field : {&m.layers, &m.heads, &m.kv_heads, &m.head_dim, &m.embedding,
                          &m.feed_forward, &m.vocab, &m.context_length})
    *field = r.read<uint32_t>("the model's shape");
  m.weights_hash = r.read<uint64_t>("the weights hash");
  m.tokenizer_hash = r.read<uint64_t>("the tokenizer hash");
  r.expect_end();
  if (m.layers == 0 || m.kv_heads == 0 || m.head_dim == 0 || m.vocab == 0) {
    throw FormatError(fmt::format("{}: layers {}, kv_heads {}, head_dim {}, vocab {}; expected each "
                                  ">= 1", r.name(), m.layers, m.kv_heads, m.head_dim, m.vocab));
  }
  return m;
}

}  // namespace veloxquant::session_file
