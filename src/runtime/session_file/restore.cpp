// Turning a parsed session file back into caches: into a live Session (after checking that it
// was saved for this model and method), or re-encoded with another method into a new file.
#include <fmt/format.h>

#include "runtime/session_file/format.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"

namespace veloxquant::session_file {

namespace {

std::string describe(const std::vector<MethodArtifact>& artifacts) {
  if (artifacts.empty()) return "none";
  const MethodArtifact& a = artifacts.front();
  return fmt::format("'{}' ({} bytes, XXH64 0x{:016x})", a.name, a.bytes, a.xxh64);
}

}  // namespace

std::vector<KVCache> restore_caches(std::vector<KVCache> caches, std::vector<SessionFile::Layer> layers,
                                    const std::vector<MethodArtifact>& artifacts) {
  const std::vector<MethodArtifact> now = artifacts_of(caches.front());
  const bool same = now.size() == artifacts.size() &&
                    (now.empty() || (now[0].name == artifacts[0].name && now[0].bytes == artifacts[0].bytes &&
                                     now[0].xxh64 == artifacts[0].xxh64));
  if (!same) {
    throw Error(fmt::format("the file was saved with another calibration artifact: the spec loads "
                            "{} now, the file lists {}", describe(now), describe(artifacts)));
  }
  // In layer order, so that a follower is checked against its restored leader.
  for (size_t l = 0; l < layers.size(); ++l) {
    try {
      caches[l].restore(std::move(layers[l].keys), std::move(layers[l].values));
    } catch (const Error& e) {
      throw FormatError(fmt::format("layer {}: {}", l, e.what()));
    }
  }
  return caches;
}

std::vector<KVCache> rebuild_caches(std::vector<SessionFile::Layer> layers, const Spec& spec,
                                    uint64_t codec_seed, const ModelIdentity& model,
                                    const std::vector<MethodArtifact>& artifacts,
                                    std::vector<LayerShape> shapes) {
  if (shapes.empty()) shapes.assign(layers.size(), LayerShape{model.kv_heads, model.head_dim, 0, codec_seed});
  // Built together, so that the layers of a cross-layer spec are paired again.
  std::vector<KVCache> caches = make_layer_caches(spec, std::move(shapes));
  return restore_caches(std::move(caches), std::move(layers), artifacts);
}

}  // namespace veloxquant::session_file

namespace veloxquant {

std::vector<float> restore_session(Session& session, SessionFile file) {
  const ModelIdentity here = model_identity(session.model());
  const std::string differences = describe_differences(here, file.model);
  if (!differences.empty()) {
    throw Error(fmt::format("the session was saved with another model: {}", differences));
  }
  // The session's own layer shapes (its RoPE, windows and calibration, per layer), without the
  // download of a GPU session's caches.
  std::vector<LayerShape> shapes = session.cache_shapes();
  const std::string spec = session.spec().to_string();
  if (file.kv_spec != spec || file.codec_seed != shapes.front().seed) {
    throw Error(fmt::format("the session was saved with another kv spec: expected '{}' (seed {}), "
                            "found '{}' (seed {})",
                            spec, shapes.front().seed, file.kv_spec, file.codec_seed));
  }
  if (file.tokens.size() > session.context()) {
    throw Error(fmt::format("the session holds {} tokens; expected at most the context's {}",
                            file.tokens.size(), session.context()));
  }
  std::vector<KVCache> caches = session_file::rebuild_caches(
      std::move(file.layers), session.spec(), file.codec_seed, file.model, file.artifacts, std::move(shapes));
  session.restore(std::move(file.tokens), std::move(caches));
  return std::move(file.logits);
}

void transcode_session(SessionFile file, std::string_view kv_spec, const std::string& out) {
  const Spec target = parse_spec(kv_spec);
  // A session file does not hold the model's RoPE, which keys stored before it need to be decoded
  // (the source) or stored (the target) at their positions.
  for (const Spec& s : {parse_spec(file.kv_spec), target}) {
    if (s.method->keys_before_rope) {
      throw Error(fmt::format("transcode: '{}' stores keys before RoPE, and a session file does not "
                              "hold the model's RoPE to rotate them with; expected methods that "
                              "store keys after RoPE on both sides", s.to_string()));
    }
  }
  if (target.eviction) {
    throw Error("transcode: '" + target.to_string() + "' evicts tokens, and session files do not "
                "hold an eviction policy's state; expected a spec without a policy");
  }
  const std::vector<KVCache> source = session_file::rebuild_caches(
      std::move(file.layers), parse_spec(file.kv_spec), file.codec_seed, file.model, file.artifacts);
  LayerShape shape = source.front().shape();
  shape.calibration = nullptr;  // the target loads its own, if it is calibrated
  std::vector<KVCache> caches = make_layer_caches(target, shape, static_cast<int>(source.size()));
  const size_t n = file.tokens.size(), h = file.model.kv_heads, d = file.model.head_dim;
  for (size_t l = 0; l < source.size(); ++l) {
    // Both are [tokens, kv_heads, head_dim]; the keys are already rotated (RoPE), so they go
    // through the append that does not rotate.
    const std::vector<float> k = source[l].decode_keys(), v = source[l].decode_values();
    caches[l].append(TensorView::f32(k.data(), {n, h, d}), TensorView::f32(v.data(), {n, h, d}));
  }
  // Held blocks (a saliency codec's, a cross-layer pair's) are encoded now, as after a step.
  for (KVCache& cache : caches) cache.finish_step();
  const std::vector<MethodArtifact> artifacts = session_file::artifacts_of(caches.front());
  session_file::write_session(out, {file.model, target.to_string(), file.codec_seed, file.tokens,
                                    file.logits, artifacts}, caches);
}

}  // namespace veloxquant
