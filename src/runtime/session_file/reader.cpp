// Reading session files: every section is located and its checksum verified before its payload
// is parsed, every count and length is checked against the bytes that are there before anything
// is allocated, and the file must end right after its last layer.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "core/xxhash64.h"
#include "runtime/session_file/format.h"
#include "veloxquant/error.h"

namespace veloxquant::session_file {
namespace {

// A section's payload, read front to back; every read is checked against what is left.
class PayloadReader {
 public:
  PayloadReader(std::span<const uint8_t> payload, std::string name)
      : bytes_(payload), name_(std::move(name)) {}

  std::span<const uint8_t> take(uint64_t n, std::string_view what) {
    if (n > bytes_.size() - pos_) {
      throw FormatError(fmt::format("{}: {} needs {} bytes, but only {} of the section are left",
                                    name_, what, n, bytes_.size() - pos_));
    }
    const auto out = bytes_.subspan(pos_, n);
    pos_ += n;
    return out;
  }
  template <class T>
  T read(std::string_view what) {
    T v;
    std::memcpy(&v, take(sizeof v, what).data(), sizeof v);
    return v;
  }
  std::string read_string(std::string_view what) {
    const uint32_t n = read<uint32_t>(fmt::format("the length of {}", what));
    const auto b = take(n, what);
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  uint64_t left() const { return bytes_.size() - pos_; }
  void expect_end() const {
    if (left() != 0) {
      throw FormatError(fmt::format("{}: {} bytes are left after its last field; expected none",
                                    name_, left()));
    }
  }
  const std::string& name() const { return name_; }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
  std::string name_;
};

// The sections of a file image, in order.
class SectionCursor {
 public:
  SectionCursor(std::span<const uint8_t> file, std::vector<SessionSection>& sections)
      : file_(file), sections_(sections) {}

  // The next section's payload, whose tag must be `tag`. `label` names it in messages.
  PayloadReader next(std::string_view tag, std::string label) {
    const uint64_t at = pos_, left = file_.size() - pos_;
    if (left < 12) {
      throw FormatError(fmt::format("the file ends at byte {} where {} was expected (truncated)",
                                    file_.size(), label));
    }
    const std::string_view found{reinterpret_cast<const char*>(file_.data() + at), 4};
    if (found != tag) {
      throw FormatError(fmt::format("byte {}: expected {} (tag '{}'), found tag '{}'", at, label, tag,
                                    printable(found)));
    }
    uint64_t payload;
    std::memcpy(&payload, file_.data() + at + 4, 8);
    if (left < kFramingBytes || payload > left - kFramingBytes) {
      throw FormatError(fmt::format("{} at byte {} declares {} payload bytes, but {} bytes follow "
                                    "its header; expected {} (truncated or corrupt)", label, at,
                                    payload, left - 12, payload + 8));
    }
    const auto framed = file_.subspan(at, 12 + payload);
    uint64_t stored;
    std::memcpy(&stored, file_.data() + at + 12 + payload, 8);
    const uint64_t computed = xxhash64(framed);
    if (stored != computed) {
      throw FormatError(fmt::format("{} at byte {} is corrupt: its XXH64 is 0x{:016x}, the file "
                                    "records 0x{:016x}", label, at, computed, stored));
    }
    pos_ = at + kFramingBytes + payload;
    sections_.push_back({std::string(tag), at, kFramingBytes + payload});
    return PayloadReader(framed.subspan(12), std::move(label));
  }

  void expect_end() const {
    if (pos_ != file_.size()) {
      throw FormatError(fmt::format("{} unexpected bytes follow the last layer at byte {}; expected "
                                    "the file to end there", file_.size() - pos_, pos_));
    }
  }

 private:
  static std::string printable(std::string_view s) {
    std::string out;
    for (char c : s) out += c >= 0x20 && c < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", static_cast<uint8_t>(c));
    return out;
  }

  std::span<const uint8_t> file_;
  std::vector<SessionSection>& sections_;
  uint64_t pos_ = kHeaderBytes;
};

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
  if (!artifacts.empty()) {
    throw FormatError(fmt::format("{}: lists {} method artifact(s), the first '{}'; kv spec '{}' "
                                  "reads none", r.name(), artifacts.size(), artifacts[0].name, spec));
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
  sections.expect_end();
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
