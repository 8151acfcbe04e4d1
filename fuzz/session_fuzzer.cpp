// Fuzz target: session files (--save-session / --load-session). parse_session_file on the input,
// then, when stories260K is beside the project, the file restored into a stories260K session with
// its kv spec and one more token evaluated, which attends over the restored (possibly corrupt)
// codes. Every section carries an XXH64 checksum that a mutation would almost always break, so
// the target recomputes the checksums of the sections it can frame before parsing: mutations then
// reach the payload parsers and the caches instead of stopping at the checksum test.
// Bad files must end in veloxquant::Error; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <vector>

#include "core/xxhash64.h"
#include "file_io/sections.h"
#include "runtime/session_file/format.h"
#include "veloxquant/error.h"
#include "veloxquant/model.h"
#include "veloxquant/session_file.h"

namespace {

namespace sf = veloxquant::session_file;

// Rewrites each section's checksum (tag | u64 length | payload | u64 XXH64) to match its bytes.
void fix_checksums(std::vector<uint8_t>& file) {
  size_t at = sf::kHeaderBytes;
  while (file.size() - at >= veloxquant::file_io::kFramingBytes) {
    uint64_t payload;
    std::memcpy(&payload, file.data() + at + 4, 8);
    if (payload > file.size() - at - veloxquant::file_io::kFramingBytes) return;
    const uint64_t sum = veloxquant::xxhash64(std::span(file).subspan(at, 12 + payload));
    std::memcpy(file.data() + at + 12 + payload, &sum, 8);
    at += veloxquant::file_io::kFramingBytes + payload;
  }
}

std::optional<veloxquant::Model> load_stories() {
  const std::string path = VELOXQUANT_SHARED_DIR "/models/stories260K.gguf";
  if (!std::filesystem::exists(path)) return std::nullopt;
  return veloxquant::Model::load(path);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::optional<veloxquant::Model> stories = load_stories();
  std::vector<uint8_t> file(data, data + size);
  if (file.size() >= sf::kHeaderBytes) fix_checksums(file);
  try {
    veloxquant::SessionFile parsed = veloxquant::parse_session_file(file);
    if (!stories) return 0;
    veloxquant::Session session(*stories, veloxquant::SessionOptions{.kv_spec = parsed.kv_spec});
    (void)veloxquant::restore_session(session, std::move(parsed));
    const int32_t next = 1;
    (void)session.eval(std::span(&next, 1));
  } catch (const veloxquant::Error&) {
    // The expected outcome for malformed or mismatched files.
  }
  return 0;
}
