// Writing session files: each section is built in memory (at most one layer's cache at a time),
// framed with its length and XXH64, and streamed to a temporary file that replaces the target
// only once it is complete and on disk.
#include <fmt/format.h>

#include <cstring>

#include "core/xxhash64.h"
#include "runtime/session_file/atomic_file.h"
#include "runtime/session_file/format.h"
#include "veloxquant/error.h"

namespace veloxquant::session_file {
namespace {

class SectionBuilder {
 public:
  explicit SectionBuilder(std::string_view tag, size_t payload_hint = 0) {
    bytes_.reserve(kFramingBytes + payload_hint);
    bytes_.insert(bytes_.end(), tag.begin(), tag.end());
    put<uint64_t>(0);  // payload length, set by finish()
  }
  template <class T>
  void put(T v) {
    put_bytes({reinterpret_cast<const uint8_t*>(&v), sizeof v});
  }
  void put_bytes(std::span<const uint8_t> b) { bytes_.insert(bytes_.end(), b.begin(), b.end()); }
  template <class T>
  void put_array(std::span<const T> values) {
    put_bytes({reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes()});
  }
  void put_string(std::string_view s) {
    put(static_cast<uint32_t>(s.size()));
    put_bytes({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  }
  std::span<const uint8_t> finish() {
    const uint64_t payload = bytes_.size() - 12;
    std::memcpy(bytes_.data() + 4, &payload, 8);
    put(xxhash64(bytes_));
    return bytes_;
  }

 private:
  std::vector<uint8_t> bytes_;
};

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

}  // namespace

void write_session(const std::string& path, const Header& h, std::span<const KVCache> caches) {
  AtomicFile out(path);
  const uint32_t version = kSessionFormatVersion;
  out.write({reinterpret_cast<const uint8_t*>(kMagic.data()), kMagic.size()});
  out.write({reinterpret_cast<const uint8_t*>(&version), 4});

  SectionBuilder model(kModelTag);
  model.put_string(h.model.architecture);
  for (uint32_t v : {h.model.layers, h.model.heads, h.model.kv_heads, h.model.head_dim,
                     h.model.embedding, h.model.feed_forward, h.model.vocab, h.model.context_length})
    model.put(v);
  model.put(h.model.weights_hash);
  model.put(h.model.tokenizer_hash);
  out.write(model.finish());

  SectionBuilder spec(kSpecTag);
  spec.put_string(h.kv_spec);
  spec.put(h.codec_seed);
  out.write(spec.finish());

  SectionBuilder artifacts(kArtifactsTag);
  artifacts.put<uint32_t>(0);  // no registered method reads artifacts yet
  out.write(artifacts.finish());

  SectionBuilder tokens(kTokensTag, 8 + h.tokens.size_bytes());
  tokens.put<uint64_t>(h.tokens.size());
  tokens.put_array(h.tokens);
  out.write(tokens.finish());

  SectionBuilder logits(kLogitsTag, 4 + h.logits.size_bytes());
  logits.put(static_cast<uint32_t>(h.logits.size()));
  logits.put_array(h.logits);
  out.write(logits.finish());

  for (size_t l = 0; l < caches.size(); ++l) {
    SectionBuilder layer(kLayerTag, layer_bytes(caches[l]));
    layer.put(static_cast<uint32_t>(l));
    layer.put<uint64_t>(caches[l].tokens());
    for (const CacheStream& s : caches[l].key_streams()) put_stream(layer, s);
    for (const CacheStream& s : caches[l].value_streams()) put_stream(layer, s);
    out.write(layer.finish());
  }
  out.commit();
}

}  // namespace veloxquant::session_file

namespace veloxquant {

void save_session(const Session& session, std::span<const float> last_logits, const std::string& path) {
  const ModelConfig& c = session.model().config();
  if (session.tokens().empty()) throw Error("save_session: the session holds no tokens; expected at least 1");
  if (last_logits.size() != c.vocab) {
    throw Error(fmt::format("save_session got {} logits; expected the vocab's {} (what eval returned "
                            "for the last token)", last_logits.size(), c.vocab));
  }
  const KVCache& first = session.caches().front();
  if (first.evicts()) {
    throw Error("save_session: '" + first.spec().to_string() + "' evicts tokens, and session files "
                "do not hold an eviction policy's state (token scores, sinks); expected a spec "
                "without a policy");
  }
  const ModelIdentity model = ModelIdentity::of(session.model());
  session_file::write_session(path, {model, first.spec().to_string(), first.shape().seed,
                                     session.tokens(), last_logits}, session.caches());
}

}  // namespace veloxquant
