// Writing session files: each section is built in memory (at most one layer's cache at a time),
// framed with its length and XXH64, and streamed to a temporary file that replaces the target
// only once it is complete and on disk.
#include <fmt/format.h>

#include <cstring>

#include "core/xxhash64.h"
#include "file_io/atomic_file.h"
#include "runtime/model/uniform_layers.h"
#include "runtime/session_file/format.h"
#include "runtime/session_file/sections.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"

namespace veloxquant::session_file {
namespace {}  // namespace

std::vector<MethodArtifact> artifacts_of(const KVCache& cache) {
  const CalibrationArtifact* a = cache.shape().calibration.get();
  if (a == nullptr) return {};
  return {MethodArtifact{a->file_name, a->file_bytes, a->file_xxh64}};
}

void write_session(const std::string& path, const Header& h, std::span<const KVCache> caches) {
  file_io::AtomicFile out(path);
  const uint32_t version = kSessionFormatVersion;
  out.write({reinterpret_cast<const uint8_t*>(kMagic.data()), kMagic.size()});
  out.write({reinterpret_cast<const uint8_t*>(&version), 4});

  SectionBuilder model(kModelTag);
  put_model(model, h.model);
  out.write(model.finish());

  SectionBuilder spec(kSpecTag);
  spec.put_string(h.kv_spec);
  spec.put(h.codec_seed);
  out.write(spec.finish());

  SectionBuilder artifacts(kArtifactsTag);
  put_artifacts(artifacts, h.artifacts);
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
    put_layer(layer, l, caches[l]);
    out.write(layer.finish());
  }
  out.commit();
}

}  // namespace veloxquant::session_file

namespace veloxquant {

void save_session(const Session& session, std::span<const float> last_logits, const std::string& path) {
  const ModelConfig& c = session.model().config();
  if (session.tokens().empty()) throw Error("save_session: the session holds no tokens; expected at least 1");
  runtime::require_uniform_layers(c, "save_session", "session files hold one KV-head shape for all layers");
  if (last_logits.size() != c.vocab) {
    throw Error(fmt::format("save_session got {} logits; expected the vocab's {} (what eval returned "
                            "for the last token)",
                            last_logits.size(), c.vocab));
  }
  const KVCache& first = session.caches().front();
  if (first.evicts()) {
    throw Error("save_session: '" + first.spec().to_string() +
                "' evicts tokens, and session files "
                "do not hold an eviction policy's state (token scores, sinks); expected a spec "
                "without a policy");
  }
  for (const KVCache& cache : session.caches()) {
    if (cache.stored_tokens(0) < cache.tokens()) {
      throw Error(fmt::format("save_session: layer {} attends through a sliding window of {} tokens and has "
                              "dropped {} of its {} tokens, and session files hold every token; expected a "
                              "prompt within the window",
                              cache.shape().layer, cache.shape().window,
                              cache.tokens() - cache.stored_tokens(0), cache.tokens()));
    }
  }
  const ModelIdentity model = model_identity(session.model());
  const std::vector<MethodArtifact> artifacts = session_file::artifacts_of(first);
  session_file::write_session(
      path, {model, first.spec().to_string(), first.shape().seed, session.tokens(), last_logits, artifacts},
      session.caches());
}

}  // namespace veloxquant
