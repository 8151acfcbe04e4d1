// Session files: a Session's token history and compressed KV caches saved to disk and restored
// byte for byte, so a long prompt is evaluated once. The format, byte by byte, and what is
// refused: docs/sessions.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "veloxquant/cache.h"
#include "veloxquant/model.h"
#include "veloxquant/model_identity.h"

namespace veloxquant {

// The only format version this build writes and reads.
inline constexpr uint32_t kSessionFormatVersion = 2;

// The identity a session file records of `model`: its shapes, and hashes of its weights and
// tokenizer.
ModelIdentity model_identity(const Model& model);

// The checksum of a precomputed file a method reads: a calibrated method's artifact
// (veloxquant/calibration.h), named by its file name in the spec's artifacts= directory. A session
// is restored only when the artifact its spec loads now is the one it was saved with.
struct MethodArtifact {
  std::string name;
  uint64_t bytes = 0;
  uint64_t xxh64 = 0;
};

// Where a section lies in the file (for `veloxquant session info`): `bytes` counts its tag,
// length and checksum too, so the sections and the 12-byte header add up to the file size.
struct SessionSection {
  std::string tag;  // "MODL", "SPEC", "ARTF", "TOKS", "LGTS", "LAYR"
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// A session file, parsed and checked.
struct SessionFile {
  struct Layer {
    std::vector<CacheStream> keys, values;  // one per KV head
  };
  uint32_t version = kSessionFormatVersion;
  ModelIdentity model;
  std::string kv_spec;  // canonical spec text of the caches' method
  uint64_t codec_seed = 0;  // LayerShape::seed the caches' codecs were built with
  std::vector<MethodArtifact> artifacts;
  std::vector<int32_t> tokens;  // the history, at least one token
  std::vector<float> logits;    // vocab logits after the last token, as eval returned them
  std::vector<Layer> layers;
  std::vector<SessionSection> sections;
};

// Checks and parses a whole file image: magic, version, every section's length and XXH64, the
// order of the sections, every count and length against the bytes present (nothing is allocated
// beyond what the input holds), token ids against the vocabulary, finite logits, per-stream
// token counts and fp16 tail sizes. Code byte counts are checked against the method's codecs
// when the caches are rebuilt (restore_session, transcode_session). Throws FormatError naming
// the first problem; never reads outside `bytes`.
SessionFile parse_session_file(std::span<const uint8_t> bytes);
// Reads and parses PATH; errors are prefixed with "session file 'PATH': ".
SessionFile read_session_file(const std::string& path);

// Saves the session's tokens and caches, and `last_logits` (what eval returned for its last
// token), to PATH: written to a temporary file in PATH's directory, fsync'ed, then renamed over
// PATH, so a crash leaves either the previous file or the new one. Throws Error if the session
// holds no tokens, the logits are not vocab-sized, or the file cannot be written.
void save_session(const Session& session, std::span<const float> last_logits,
                  const std::string& path);

// Replaces the session's tokens and caches by the file's and returns the logits after its last
// token. Refused with Error naming what differs, before the session changes, when the file was
// saved with another model, another kv spec, or holds more tokens than the context.
std::vector<float> restore_session(Session& session, SessionFile file);

// Re-encodes a session's caches with another method: each layer is decoded to f32 and appended
// to a fresh cache of `kv_spec`. Decoded keys are after RoPE, so they are appended as they are (no
// second rotation). Refused when either spec's method stores keys before RoPE
// (MethodInfo::keys_before_rope): the file does not hold the model's RoPE that needs. Writes OUT
// like save_session.
void transcode_session(SessionFile file, std::string_view kv_spec, const std::string& out);

// Cache files: the caches of one or more layers without a model (the Python package's
// Cache.save and save_caches): spec, shape, codec seed, the artifact a calibrated spec read, and
// every stream, framed and checksummed like session files and written atomically. docs/sessions.md
// has the format.
inline constexpr uint32_t kCacheFileVersion = 1;
// `caches`: one cache built alone, or a model's layers as make_layer_caches() builds them (layer l
// at index l). Throws Error naming the problem when the list is empty, the caches differ in spec,
// seed, shape or tokens, one evicts (a policy's state is not saved), or a lone cache is one layer
// of a cross-layer group.
void save_caches(std::span<const KVCache> caches, const std::string& path);
void save_caches(std::span<const KVCache* const> caches, const std::string& path);
// The caches saved at PATH, rebuilt and restored byte for byte. Throws FormatError (prefixed with
// "cache file 'PATH': ") naming the first field that is truncated, corrupt or inconsistent with
// the spec's codecs, and Error when the spec's calibration artifact is not the one saved.
std::vector<KVCache> load_caches(const std::string& path);

}  // namespace veloxquant
