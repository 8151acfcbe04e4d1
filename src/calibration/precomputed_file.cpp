// Precomputed-table files, framed like session files (file_io/sections.h):
//   "VQTABLE\0" | u32 version | one TABL section per table
// TABL: u32 kind, u64 dim, u64 size, u64 seed, u64 byte count, the table's bytes. Tables are in
// key order and no key appears twice. Written atomically; read whole, every section's checksum
// verified before it is parsed.
#include "calibration/precomputed_file.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <mutex>
#include <set>

#include "core/precomputed.h"
#include "file_io/atomic_file.h"
#include "file_io/read_file.h"
#include "file_io/sections.h"
#include "veloxquant/cache.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"
#include "veloxquant/precomputed.h"

namespace veloxquant {
namespace {

constexpr std::string_view kMagic{"VQTABLE\0", 8};
constexpr size_t kHeader = 8 + 4;
constexpr std::string_view kTableTag = "TABL";
constexpr uint32_t kLastKind = static_cast<uint32_t>(TableKind::GaussianCodebook);

std::vector<uint8_t> read_whole(const std::string& path) {
  std::error_code ec;
  if (path.find('\0') == std::string::npos && !std::filesystem::exists(path, ec)) {
    throw Error(fmt::format("no precomputed tables '{}'; make them with `veloxquant precompute --kv SPEC "
                            "--head-dim D --layers L -o DIR`",
                            path));
  }
  try {
    return file_io::read_file(path);
  } catch (const Error& e) {
    throw Error(fmt::format("precomputed tables '{}': {}", file_io::shown_path(path), e.what()));
  }
}

}  // namespace

Tables parse_precomputed(std::span<const uint8_t> bytes) {
  file_io::check_header(bytes, kMagic, kPrecomputedFormatVersion, "precomputed-table file",
                        " (run `veloxquant precompute` again)");
  file_io::SectionCursor cursor(bytes, kHeader);
  Tables tables;
  for (size_t i = 0; !cursor.at_end(); ++i) {
    file_io::PayloadReader r = cursor.next(kTableTag, fmt::format("table {} (TABL)", i));
    const uint32_t kind = r.read<uint32_t>("the table kind");
    if (kind == 0 || kind > kLastKind) {
      throw FormatError(fmt::format("{}: kind {}; expected 1 to {}", r.name(), kind, kLastKind));
    }
    TableKey key{static_cast<TableKind>(kind)};
    key.dim = r.read<uint64_t>("the dimension");
    key.size = r.read<uint64_t>("the size");
    key.seed = r.read<uint64_t>("the seed");
    const uint64_t n = r.read<uint64_t>("the byte count");
    const auto data = r.take(n, "the table");
    r.expect_end();
    if (!tables.emplace(key, Table(data.begin(), data.end())).second) {
      throw FormatError(fmt::format("{}: {} appears twice", r.name(), describe_table(key)));
    }
  }
  return tables;
}

namespace {

void write_tables(const Tables& tables, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("precompute: cannot create directory '{}': {}", dir, ec.message()));
  file_io::AtomicFile out(precomputed_path(dir));
  const uint32_t version = kPrecomputedFormatVersion;
  out.write({reinterpret_cast<const uint8_t*>(kMagic.data()), kMagic.size()});
  out.write({reinterpret_cast<const uint8_t*>(&version), 4});
  for (const auto& [key, table] : tables) {
    file_io::SectionBuilder s(kTableTag, 4 + 4 * 8 + table.size());
    s.put(static_cast<uint32_t>(key.kind));
    s.put(key.dim);
    s.put(key.size);
    s.put(key.seed);
    s.put<uint64_t>(table.size());
    s.put_bytes(table);
    out.write(s.finish());
  }
  out.commit();
}

}  // namespace

std::string precomputed_path(const std::string& dir) {
  return (std::filesystem::path(dir) / "tables.vqtab").string();
}

PrecomputeReport precompute_tables(const PrecomputeRequest& request, const std::string& dir) {
  if (request.specs.empty()) throw SpecError("precompute: no spec; expected at least one (--kv SPEC)");
  if (request.head_dims.empty()) throw Error("precompute: no head_dim; expected at least one");
  if (request.kv_heads < 1) throw Error("precompute: kv_heads 0; expected at least 1");
  if (request.layers < 1) {
    throw Error(fmt::format("precompute: layers {}; expected at least 1", request.layers));
  }
  std::vector<Spec> specs;
  for (const std::string& text : request.specs) {
    Spec spec = parse_spec(text);
    // The tables are being made: a method that is not calibrated must not look for them.
    if (!spec.method->calibrated() && spec.params.strings.contains("artifacts"))
      spec.params.strings["artifacts"].clear();
    specs.push_back(std::move(spec));
  }
  Tables tables;
  std::error_code ec;  // a name the file system refuses holds no tables; writing them says why
  if (std::filesystem::exists(precomputed_path(dir), ec)) {
    try {
      tables = parse_precomputed(read_whole(precomputed_path(dir)));
    } catch (const FormatError& e) {
      throw FormatError(fmt::format("precomputed tables '{}': {}", precomputed_path(dir), e.what()));
    }
  }
  const size_t before = tables.size();
  const auto start = std::chrono::steady_clock::now();
  start_recording();
  try {
    for (const Spec& spec : specs)
      for (size_t head_dim : request.head_dims)
        for (int layer = 0; layer < request.layers; ++layer) {
          const LayerShape shape{.kv_heads = request.kv_heads,
                                 .head_dim = head_dim,
                                 .layer = layer,
                                 .seed = request.seed,
                                 .layers = request.layers};
          const KVCache cache(spec, shape);
        }
  } catch (...) {
    stop_recording();
    throw;
  }
  const Tables computed = stop_recording();
  PrecomputeReport report;
  report.compute_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  tables.insert(computed.begin(), computed.end());
  write_tables(tables, dir);
  report.tables = tables.size();
  report.added = tables.size() - before;
  report.file_bytes = std::filesystem::file_size(precomputed_path(dir));
  return report;
}

void load_precomputed(const std::string& dir) {
  const std::string path = precomputed_path(dir);
  // One read per file: keyed by path, size and modification time.
  static std::mutex mutex;
  static std::set<std::tuple<std::string, uintmax_t, int64_t>> loaded;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  const auto time = ec ? std::filesystem::file_time_type{} : std::filesystem::last_write_time(path, ec);
  const auto id = std::make_tuple(path, size, static_cast<int64_t>(time.time_since_epoch().count()));
  std::lock_guard lock(mutex);
  if (!ec && loaded.contains(id)) return;
  const std::vector<uint8_t> bytes = read_whole(path);
  try {
    add_loaded_tables(parse_precomputed(bytes));
  } catch (const FormatError& e) {
    throw FormatError(fmt::format("precomputed tables '{}': {}", path, e.what()));
  }
  loaded.insert(id);
}

}  // namespace veloxquant
