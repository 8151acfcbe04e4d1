// The payloads session files and cache files share: the artifact list and a cache stream.
#include "runtime/session_file/sections.h"

namespace veloxquant::session_file {

void put_stream(SectionBuilder& s, const CacheStream& stream) {
  s.put<uint64_t>(stream.state.size());
  s.put_bytes(stream.state);
  s.put<uint64_t>(stream.encoded);
  s.put<uint64_t>(stream.codes.size());
  s.put_bytes(stream.codes);
  s.put<uint64_t>(stream.tail_tokens);
  s.put_bytes(stream.tail);
}

size_t layer_bytes(const KVCache& cache) {
  size_t b = 4 + 8;
  for (const auto* streams : {&cache.key_streams(), &cache.value_streams()})
    for (const CacheStream& s : *streams) b += 4 * 8 + s.state.size() + s.codes.size() + s.tail.size();
  return b;
}

CacheStream read_stream(PayloadReader& r, uint64_t tokens, uint32_t head_dim, std::string_view what) {
  CacheStream s;
  const uint64_t state_bytes = r.read<uint64_t>(fmt::format("the fitted state size of {}", what));
  const auto state = r.take(state_bytes, fmt::format("the fitted state of {}", what));
  s.state.assign(state.begin(), state.end());
  s.encoded = r.read<uint64_t>(fmt::format("the encoded token count of {}", what));
  const uint64_t code_bytes = r.read<uint64_t>(fmt::format("the code size of {}", what));
  const auto codes = r.take(code_bytes, fmt::format("the codes of {}", what));
  s.codes.assign(codes.begin(), codes.end());
  s.tail_tokens = r.read<uint64_t>(fmt::format("the tail token count of {}", what));
  if (s.encoded > tokens || s.tail_tokens != tokens - s.encoded) {
    throw FormatError(fmt::format("{}: {} holds {} encoded + {} tail tokens; expected {} in all",
                                  r.name(), what, s.encoded, s.tail_tokens, tokens));
  }
  uint64_t tail_bytes;
  if (__builtin_mul_overflow(s.tail_tokens, uint64_t{head_dim} * 2, &tail_bytes)) {
    throw FormatError(fmt::format("{}: the fp16 tail of {} ({} tokens x {} values) overflows",
                                  r.name(), what, s.tail_tokens, head_dim));
  }
  const auto tail = r.take(tail_bytes, fmt::format("the fp16 tail of {}", what));
  s.tail.assign(tail.begin(), tail.end());
  return s;
}

void put_artifacts(SectionBuilder& s, std::span<const MethodArtifact> artifacts) {
  s.put(static_cast<uint32_t>(artifacts.size()));
  for (const MethodArtifact& a : artifacts) {
    s.put_string(a.name);
    s.put(a.bytes);
    s.put(a.xxh64);
  }
}

std::vector<MethodArtifact> read_artifacts(PayloadReader r, const std::string& spec) {
  const uint32_t count = r.read<uint32_t>("the artifact count");
  std::vector<MethodArtifact> artifacts;
  for (uint32_t i = 0; i < count; ++i) {
    MethodArtifact a;
    a.name = r.read_string("an artifact name");
    a.bytes = r.read<uint64_t>("an artifact size");
    a.xxh64 = r.read<uint64_t>("an artifact checksum");
    artifacts.push_back(std::move(a));
  }
  r.expect_end();
  // A spec reads one artifact at most (a calibrated method's): which one is checked when the
  // caches are rebuilt, against what the spec loads then.
  if (artifacts.size() > 1) {
    throw FormatError(fmt::format("{}: lists {} method artifacts, the first '{}'; kv spec '{}' reads "
                                  "one at most", r.name(), artifacts.size(), artifacts[0].name, spec));
  }
  return artifacts;
}

void put_layer(SectionBuilder& s, size_t index, const KVCache& cache) {
  s.put(static_cast<uint32_t>(index));
  s.put<uint64_t>(cache.tokens());
  for (const CacheStream& stream : cache.key_streams()) put_stream(s, stream);
  for (const CacheStream& stream : cache.value_streams()) put_stream(s, stream);
}

SessionFile::Layer read_layer(PayloadReader r, uint32_t index, uint64_t tokens, uint32_t kv_heads,
                              uint32_t head_dim) {
  const uint32_t stored_index = r.read<uint32_t>("the layer index");
  const uint64_t stored_tokens = r.read<uint64_t>("the layer's token count");
  if (stored_index != index || stored_tokens != tokens) {
    throw FormatError(fmt::format("{}: holds layer {} with {} tokens; expected layer {} with {}",
                                  r.name(), stored_index, stored_tokens, index, tokens));
  }
  SessionFile::Layer layer;
  for (uint32_t h = 0; h < kv_heads; ++h)
    layer.keys.push_back(read_stream(r, tokens, head_dim, fmt::format("the keys of KV head {}", h)));
  for (uint32_t h = 0; h < kv_heads; ++h)
    layer.values.push_back(read_stream(r, tokens, head_dim, fmt::format("the values of KV head {}", h)));
  r.expect_end();
  return layer;
}

}  // namespace veloxquant::session_file
