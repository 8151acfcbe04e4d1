// Session file format version 2, shared by the writer and the reader. docs/sessions.md has the
// byte-by-byte table. Every integer is little-endian; every section is framed as
//   tag (4 ASCII bytes) | u64 payload length | payload | u64 XXH64 of tag, length and payload
// and the sections follow the 12-byte header in one fixed order: MODL SPEC ARTF TOKS LGTS, then
// one LAYR per layer. The file ends right after the last LAYR.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "veloxquant/session_file.h"

namespace veloxquant::session_file {

static_assert(std::endian::native == std::endian::little, "session files are read and written "
              "with memcpy, which assumes a little-endian host");

inline constexpr std::string_view kMagic{"VQSESSN\0", 8};
inline constexpr size_t kHeaderBytes = 8 + 4;  // magic, u32 version

inline constexpr std::string_view kModelTag = "MODL", kSpecTag = "SPEC", kArtifactsTag = "ARTF",
                                  kTokensTag = "TOKS", kLogitsTag = "LGTS", kLayerTag = "LAYR";

// What a file holds besides the caches, borrowed from the caller.
struct Header {
  const ModelIdentity& model;
  std::string_view kv_spec;
  uint64_t codec_seed;
  std::span<const int32_t> tokens;
  std::span<const float> logits;
  std::span<const MethodArtifact> artifacts;
};

// Writes a whole file atomically (temporary file, fsync, rename). REQUIRES: one cache per layer
// of header.model, each holding header.tokens.size() tokens.
void write_session(const std::string& path, const Header& header, std::span<const KVCache> caches);

// The artifacts a cache's method reads (its calibration file), as a session file lists them.
std::vector<MethodArtifact> artifacts_of(const KVCache& cache);

// Restores `layers` into `caches` (built for the file's spec), after checking that the spec's
// calibration artifact is the one the file lists (Error naming both otherwise); FormatError
// naming the layer and stream when a stream does not fit the codecs.
std::vector<KVCache> restore_caches(std::vector<KVCache> caches, std::vector<SessionFile::Layer> layers,
                                    const std::vector<MethodArtifact>& artifacts);

// One cache per layer from the parsed streams, each checked against its codecs (FormatError
// naming the layer and stream otherwise). Throws Error naming both when the artifact the spec
// loads now is not the one the file lists. `shapes`: the model's layers as a session builds them
// (their RoPE for a method that stores keys before it, their windows); empty: the file's KV heads
// and head_dim with the codec seed, without RoPE.
std::vector<KVCache> rebuild_caches(std::vector<SessionFile::Layer> layers, const Spec& spec,
                                    uint64_t codec_seed, const ModelIdentity& model,
                                    const std::vector<MethodArtifact>& artifacts,
                                    std::vector<LayerShape> shapes = {});

}  // namespace veloxquant::session_file
