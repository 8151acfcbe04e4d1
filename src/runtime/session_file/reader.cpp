// Reading session files: every section is located and its checksum verified before its payload
// is parsed, every count and length is checked against the bytes that are there before anything
// is allocated, and the file must end right after its last layer.
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "core/xxhash64.h"
#include "file_io/read_file.h"
#include "runtime/session_file/format.h"
#include "runtime/session_file/sections.h"
#include "veloxquant/error.h"

namespace veloxquant::session_file {
namespace {

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
  SectionCursor sections(bytes, kHeaderBytes);
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
    f.layers.push_back(read_layer(sections.next(kLayerTag, label), l, f.tokens.size(), f.model.kv_heads, f.model.head_dim));
  }
  sections.expect_end("the last layer");
  for (const SectionCursor::Located& at : sections.located())
    f.sections.push_back({at.tag, at.offset, at.bytes});
  return f;
}

SessionFile read_session_file(const std::string& path) {
  try {
    return parse_session_file(file_io::read_file(path));
  } catch (const FormatError& e) {
    throw FormatError(fmt::format("session file '{}': {}", path, e.what()));
  } catch (const Error& e) {
    throw Error(fmt::format("session file '{}': {}", path, e.what()));
  }
}

}  // namespace veloxquant
