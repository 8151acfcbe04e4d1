// The payloads session files and cache files share, in the framing of file_io/sections.h.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "file_io/model_section.h"
#include "file_io/sections.h"
#include "runtime/session_file/format.h"
#include "veloxquant/error.h"
#include "veloxquant/session_file.h"

namespace veloxquant::session_file {

using file_io::PayloadReader;
using file_io::put_model;
using file_io::read_model;
using file_io::SectionBuilder;
using file_io::SectionCursor;

// The method artifacts a spec reads (ARTF): a count, then each one's name, size and XXH64.
void put_artifacts(SectionBuilder& s, std::span<const MethodArtifact> artifacts);
// Throws FormatError when the payload is malformed or lists more than one (a spec reads one at
// most; which one is checked when the caches are rebuilt).
std::vector<MethodArtifact> read_artifacts(PayloadReader r, const std::string& spec);

// One cache stream (CacheStream): fitted state, encoded token count, codes, tail token count and
// the fp16 tail, each size first.
void put_stream(SectionBuilder& s, const CacheStream& stream);
// The bytes put_stream() writes for every stream of `cache` (a section's size hint).
size_t layer_bytes(const KVCache& cache);
// Throws FormatError naming `what` when a size runs past the section or the token counts do not
// add up to `tokens`.
CacheStream read_stream(PayloadReader& r, uint64_t tokens, uint32_t head_dim, std::string_view what);

// A layer's section (LAYR): its index, its token count, then the key streams and the value
// streams of its KV heads.
void put_layer(SectionBuilder& s, size_t index, const KVCache& cache);
// Throws FormatError naming the field when the section holds another layer or token count, or a
// stream does not parse.
SessionFile::Layer read_layer(PayloadReader r, uint32_t index, uint64_t tokens, uint32_t kv_heads,
                              uint32_t head_dim);

}  // namespace veloxquant::session_file
