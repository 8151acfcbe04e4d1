// Cache files: the caches of one or more layers without a model, in the session files' framing.
//   magic "VQCACHE\0", u32 version
//   SHAP: spec text, u64 codec seed, u32 kv_heads, u32 head_dim, u32 layer (of a lone cache),
//         u32 model layers (LayerShape::layers), u32 layers saved (0: one lone cache), u64 tokens
//   ARTF: the artifact a calibrated spec read (as in session files)
//   LAYR: one per layer saved, as in session files
#include <fmt/format.h>

#include <cstring>

#include "file_io/atomic_file.h"
#include "file_io/read_file.h"
#include "runtime/session_file/format.h"
#include "runtime/session_file/sections.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

using namespace session_file;

constexpr std::string_view kCacheMagic{"VQCACHE\0", 8};
constexpr std::string_view kShapeTag = "SHAP";

// What the caches were built with; `group` is 0 for a lone cache and the layer count otherwise.
struct SavedShape {
  std::string spec;
  LayerShape shape;
  uint32_t group = 0;
  uint64_t tokens = 0;
};

SavedShape check_savable(std::span<const KVCache* const> caches) {
  if (caches.empty()) throw Error("save_caches got no cache; expected at least one");
  const KVCache& first = *caches.front();
  SavedShape s{first.spec().to_string(), first.shape(), 0, first.tokens()};
  if (first.evicts()) {
    throw Error("save_caches: '" + s.spec + "' evicts tokens, and cache files do not hold an eviction "
                "policy's state; expected a spec without a policy");
  }
  for (const KVCache* c : caches) {
    if (c->spec().method->keys_before_rope && c->shape().rope.dims != 0) {
      throw Error("save_caches: '" + s.spec + "' holds keys before RoPE that are rotated with the "
                  "model's RoPE, and cache files do not hold it; expected caches appended without "
                  "RoPE (save the session instead)");
    }
  }
  const bool group = caches.size() > 1 || first.cross_layer();
  if (group && caches.size() != static_cast<size_t>(first.shape().layers)) {
    throw Error(fmt::format("save_caches got {} of the {} layers of a '{}' group; expected all of "
                            "them, as make_layer_caches (Cache.for_layers) built them", caches.size(),
                            first.shape().layers, s.spec));
  }
  for (size_t l = 0; group && l < caches.size(); ++l) {
    const KVCache& c = *caches[l];
    const LayerShape& sh = c.shape();
    if (c.spec().to_string() != s.spec || sh.kv_heads != s.shape.kv_heads || sh.head_dim != s.shape.head_dim ||
        sh.seed != s.shape.seed || sh.layer != static_cast<int>(l) || c.tokens() != s.tokens) {
      throw Error(fmt::format("save_caches: cache {} is layer {} of '{}' ({} KV heads of {}, seed {}, {} "
                              "tokens); expected layer {} of '{}' ({} of {}, seed {}, {} tokens)", l, sh.layer,
                              c.spec().to_string(), sh.kv_heads, sh.head_dim, sh.seed, c.tokens(), l, s.spec,
                              s.shape.kv_heads, s.shape.head_dim, s.shape.seed, s.tokens));
    }
  }
  if (group) s.group = static_cast<uint32_t>(caches.size());
  return s;
}

SavedShape read_shape(PayloadReader r) {
  SavedShape s;
  const std::string text = r.read_string("the kv spec");
  s.shape.seed = r.read<uint64_t>("the codec seed");
  s.shape.kv_heads = r.read<uint32_t>("the KV head count");
  s.shape.head_dim = r.read<uint32_t>("head_dim");
  s.shape.layer = static_cast<int>(r.read<uint32_t>("the layer index"));
  s.shape.layers = static_cast<int>(r.read<uint32_t>("the model's layer count"));
  s.group = r.read<uint32_t>("the saved layer count");
  s.tokens = r.read<uint64_t>("the token count");
  r.expect_end();
  if (s.shape.kv_heads == 0 || s.shape.head_dim == 0 || s.shape.layers < 1 || s.shape.layers > (1 << 16) ||
      s.group > static_cast<uint32_t>(s.shape.layers)) {
    throw FormatError(fmt::format("{}: kv_heads {}, head_dim {}, layers {}, saved layers {}; expected "
                                  "kv_heads and head_dim >= 1, 1 to 65536 layers, at most that many saved",
                                  r.name(), s.shape.kv_heads, s.shape.head_dim, s.shape.layers, s.group));
  }
  try {
    s.spec = parse_spec(text).to_string();
  } catch (const SpecError& e) {
    throw FormatError(fmt::format("{}: kv spec '{}' is not valid in this build: {}", r.name(), text, e.what()));
  }
  return s;
}

std::vector<KVCache> parse_cache_file(std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kCacheMagic.data(), kCacheMagic.size()) != 0) {
    throw FormatError("not a VeloxQuant cache file: it does not start with the magic \"VQCACHE\\0\"");
  }
  uint32_t version;
  std::memcpy(&version, bytes.data() + 8, 4);
  if (version != kCacheFileVersion) {
    throw FormatError(fmt::format("format version {}; expected version {}, the only one this build reads",
                                  version, kCacheFileVersion));
  }
  SectionCursor cursor(bytes, kHeaderBytes);
  const SavedShape s = read_shape(cursor.next(kShapeTag, "the shape section (SHAP)"));
  const std::vector<MethodArtifact> artifacts =
      read_artifacts(cursor.next(kArtifactsTag, "the artifact section (ARTF)"), s.spec);
  const uint32_t count = s.group ? s.group : 1;
  std::vector<SessionFile::Layer> layers;
  for (uint32_t l = 0; l < count; ++l) {
    layers.push_back(read_layer(cursor.next(kLayerTag, fmt::format("the section of layer {} (LAYR)", l)), l,
                                s.tokens, static_cast<uint32_t>(s.shape.kv_heads),
                                static_cast<uint32_t>(s.shape.head_dim)));
  }
  cursor.expect_end("the last layer");
  const Spec spec = parse_spec(s.spec);
  std::vector<KVCache> caches;
  if (s.group) {
    caches = make_layer_caches(spec, LayerShape{s.shape.kv_heads, s.shape.head_dim, 0, s.shape.seed},
                               static_cast<int>(s.group));
  } else {
    caches.emplace_back(spec, s.shape);
  }
  return restore_caches(std::move(caches), std::move(layers), artifacts);
}

}  // namespace

void save_caches(std::span<const KVCache> caches, const std::string& path) {
  std::vector<const KVCache*> pointers;
  for (const KVCache& c : caches) pointers.push_back(&c);
  save_caches(std::span<const KVCache* const>(pointers), path);
}

void save_caches(std::span<const KVCache* const> caches, const std::string& path) {
  const SavedShape s = check_savable(caches);
  file_io::AtomicFile out(path);
  out.write({reinterpret_cast<const uint8_t*>(kCacheMagic.data()), kCacheMagic.size()});
  const uint32_t version = kCacheFileVersion;
  out.write({reinterpret_cast<const uint8_t*>(&version), 4});
  SectionBuilder shape(kShapeTag);
  shape.put_string(s.spec);
  shape.put(s.shape.seed);
  for (size_t v : {s.shape.kv_heads, s.shape.head_dim}) shape.put(static_cast<uint32_t>(v));
  shape.put(static_cast<uint32_t>(s.shape.layer));
  shape.put(static_cast<uint32_t>(s.shape.layers));
  shape.put(s.group);
  shape.put(s.tokens);
  out.write(shape.finish());
  SectionBuilder artifacts(kArtifactsTag);
  put_artifacts(artifacts, artifacts_of(*caches.front()));
  out.write(artifacts.finish());
  for (size_t l = 0; l < caches.size(); ++l) {
    SectionBuilder layer(kLayerTag, layer_bytes(*caches[l]));
    put_layer(layer, l, *caches[l]);
    out.write(layer.finish());
  }
  out.commit();
}

std::vector<KVCache> load_caches(const std::string& path) {
  try {
    return parse_cache_file(file_io::read_file(path));
  } catch (const FormatError& e) {
    throw FormatError(fmt::format("cache file '{}': {}", path, e.what()));
  } catch (const Error& e) {
    throw Error(fmt::format("cache file '{}': {}", path, e.what()));
  }
}

}  // namespace veloxquant
