// Reading session files: every section is located and its checksum verified before its payload
// is parsed, every count and length is checked against the bytes that are there before anything
// is allocated, and the file must end right after its last layer.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "core/xxhash64.h"
#include "runtime/session_file/format.h"
#include "runtime/session_file/sections.h"
#include "veloxquant/error.h"

namespace veloxquant::session_file {
namespace {

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

std::vector<int32_t> read_tokens(PayloadReader r, uint32_t vocab) {
  const uint64_t count = r.read<uint64_t>("the token count");
  if (count == 0 || count != r.left() / 4 || r.left() % 4 != 0) {
    throw FormatError(fmt::format("{}: {} tokens declared in {} bytes; expected at least 1 token of "
                                  "4 bytes each", r.name(), count, r.left()));
  }
  std::vector<int32_t> tokens(count);
  std::memcpy(tokens.data(), r.take(count * 4, "the tokens").data(), count * 4);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<uint32_t>(tokens[i]) >= vocab) {
      throw FormatError(fmt::format("{}: token {} is id {}; expected 0..{}", r.name(), i, tokens[i],
                                    vocab - 1));
    }
  }
  return tokens;
}

std::vector<float> read_logits(PayloadReader r, uint32_t vocab) {
  const uint32_t count = r.read<uint32_t>("the logit count");
  if (count != vocab) {
    throw FormatError(fmt::format("{}: {} logits; expected one per vocab entry ({})", r.name(), count, vocab));
  }
  std::vector<float> logits(count);
  std::memcpy(logits.data(), r.take(uint64_t{count} * 4, "the logits").data(), uint64_t{count} * 4);
  r.expect_end();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) {
      throw FormatError(fmt::format("{}: logit {} is {}; expected a finite value", r.name(), i, logits[i]));
    }
  }
  return logits;
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

SessionFile::Layer read_layer(PayloadReader r, uint32_t index, uint64_t tokens, const ModelIdentity& m) {
  const uint32_t stored_index = r.read<uint32_t>("the layer index");
  const uint64_t stored_tokens = r.read<uint64_t>("the layer's token count");
  if (stored_index != index || stored_tokens != tokens) {
    throw FormatError(fmt::format("{}: holds layer {} with {} tokens; expected layer {} with {}",
                                  r.name(), stored_index, stored_tokens, index, tokens));
  }
  SessionFile::Layer layer;
  for (uint32_t h = 0; h < m.kv_heads; ++h)
    layer.keys.push_back(read_stream(r, tokens, m.head_dim, fmt::format("the keys of KV head {}", h)));
  for (uint32_t h = 0; h < m.kv_heads; ++h)
    layer.values.push_back(read_stream(r, tokens, m.head_dim, fmt::format("the values of KV head {}", h)));
  r.expect_end();
  return layer;
}

}  // namespace
}  // namespace veloxquant::session_file

namespace veloxquant {

SessionFile parse_session_file(std::span<const uint8_t> bytes) {
  using namespace session_file;
  if (bytes.size() < kHeaderBytes) {
    throw FormatError(fmt::format("the file has {} bytes; a session file starts with a {}-byte header",
                                  bytes.size(), kHeaderBytes));
  }
  if (std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    throw FormatError("not a VeloxQuant session file: its first 8 bytes are not the magic \"VQSESSN\\0\"");
  }
  SessionFile f;
  std::memcpy(&f.version, bytes.data() + 8, 4);
  if (f.version != kSessionFormatVersion) {
    throw FormatError(fmt::format("format version {}; expected version {}, the only one this build "
                                  "reads", f.version, kSessionFormatVersion));
  }
  SectionCursor sections(bytes, f.sections);
  f.model = read_model(sections.next(kModelTag, "the model section (MODL)"));
  {
    PayloadReader spec = sections.next(kSpecTag, "the spec section (SPEC)");
    const std::string text = spec.read_string("the kv spec");
    f.codec_seed = spec.read<uint64_t>("the codec seed");
    spec.expect_end();
    try {
      f.kv_spec = parse_spec(text).to_string();
    } catch (const SpecError& e) {
      throw FormatError(fmt::format("{}: kv spec '{}' is not valid in this build: {}", spec.name(), text, e.what()));
    }
  }
  f.artifacts = read_artifacts(sections.next(kArtifactsTag, "the artifact section (ARTF)"), f.kv_spec);
  f.tokens = read_tokens(sections.next(kTokensTag, "the token section (TOKS)"), f.model.vocab);
  f.logits = read_logits(sections.next(kLogitsTag, "the logits section (LGTS)"), f.model.vocab);
  for (uint32_t l = 0; l < f.model.layers; ++l) {
    const std::string label = fmt::format("the section of layer {} (LAYR)", l);
    f.layers.push_back(read_layer(sections.next(kLayerTag, label), l, f.tokens.size(), f.model));
  }
  sections.expect_end("the last layer");
  return f;
}

SessionFile read_session_file(const std::string& path) {
  try {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) throw Error(fmt::format("cannot open it: {}", std::strerror(errno)));
    std::vector<uint8_t> bytes(static_cast<size_t>(in.tellg()));
    in.seekg(0);
    if (!in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size())))
      throw Error("reading it failed");
    return parse_session_file(bytes);
  } catch (const FormatError& e) {
    throw FormatError(fmt::format("session file '{}': {}", path, e.what()));
  } catch (const Error& e) {
    throw Error(fmt::format("session file '{}': {}", path, e.what()));
  }
}

}  // namespace veloxquant
