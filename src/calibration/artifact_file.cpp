// Calibration artifact files, framed like session files (file_io/sections.h):
//   "VQCALIB\0" | u32 version | MODL | CALB | one LAYR per layer
// MODL: the model identity. CALB: string spec, u32 layers, u32 kv_heads, u32 head_dim,
// u64 calibration tokens. LAYR: u32 layer, u32 heads, then per head u32 table count and per table
// string name, u64 count, f32[count]. Written atomically; read whole, every section's checksum
// verified before it is parsed.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "file_io/atomic_file.h"
#include "file_io/model_section.h"
#include "file_io/read_file.h"
#include "file_io/sections.h"
#include "veloxquant/calibration.h"
#include "veloxquant/error.h"

namespace veloxquant {
namespace {

using file_io::PayloadReader;
using file_io::SectionBuilder;

constexpr std::string_view kMagic{"VQCALIB\0", 8};
constexpr size_t kHeader = 8 + 4;
constexpr std::string_view kModelTag = "MODL", kCalibrationTag = "CALB", kLayerTag = "LAYR";

void put_layer(SectionBuilder& s, uint32_t index, const LayerCalibration& layer) {
  s.put(index);
  s.put(static_cast<uint32_t>(layer.heads.size()));
  for (const auto& tables : layer.heads) {
    s.put(static_cast<uint32_t>(tables.size()));
    for (const auto& [name, values] : tables) {
      s.put_string(name);
      s.put<uint64_t>(values.size());
      s.put_array(std::span<const float>(values));
    }
  }
}

LayerCalibration read_layer(PayloadReader r, uint32_t index, uint32_t kv_heads) {
  const uint32_t found = r.read<uint32_t>("the layer index");
  if (found != index) {
    throw FormatError(fmt::format("{}: holds layer {}; expected layer {}", r.name(), found, index));
  }
  const uint32_t heads = r.read<uint32_t>("the KV head count");
  if (heads != kv_heads) {
    throw FormatError(fmt::format("{}: {} KV heads; expected {}", r.name(), heads, kv_heads));
  }
  LayerCalibration layer;
  layer.heads.resize(heads);
  for (uint32_t h = 0; h < heads; ++h) {
    const uint32_t count = r.read<uint32_t>("a table count");
    for (uint32_t t = 0; t < count; ++t) {
      std::string name = r.read_string("a table name");
      const uint64_t n = r.read<uint64_t>("a table length");
      if (n > r.left() / sizeof(float)) {
        throw FormatError(fmt::format("{}: table '{}' of KV head {} declares {} floats, but only {} "
                                      "bytes are left", r.name(), name, h, n, r.left()));
      }
      const auto bytes = r.take(n * sizeof(float), "a table");
      std::vector<float> values(n);
      std::memcpy(values.data(), bytes.data(), bytes.size());
      for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(values[i])) {
          throw FormatError(fmt::format("{}: table '{}' of KV head {} holds {} at index {}; expected "
                                        "finite values", r.name(), name, h, values[i], i));
        }
      }
      if (!layer.heads[h].emplace(std::move(name), std::move(values)).second) {
        throw FormatError(fmt::format("{}: KV head {} lists a table twice", r.name(), h));
      }
    }
  }
  r.expect_end();
  return layer;
}

}  // namespace

std::string calibration_path(const std::string& dir, std::string_view method) {
  return (std::filesystem::path(dir) / (std::string(method) + ".vqcal")).string();
}

void save_calibration(const CalibrationArtifact& a, const std::string& dir) {
  const Spec spec = parse_spec(a.spec);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(fmt::format("calibration: cannot create directory '{}': {}", dir, ec.message()));
  file_io::AtomicFile out(calibration_path(dir, spec.method->name));
  const uint32_t version = kCalibrationFormatVersion;
  out.write({reinterpret_cast<const uint8_t*>(kMagic.data()), kMagic.size()});
  out.write({reinterpret_cast<const uint8_t*>(&version), 4});
  SectionBuilder model(kModelTag);
  file_io::put_model(model, a.model);
  out.write(model.finish());
  SectionBuilder header(kCalibrationTag);
  header.put_string(a.spec);
  header.put(static_cast<uint32_t>(a.layers.size()));
  header.put(a.kv_heads);
  header.put(a.head_dim);
  header.put(a.tokens);
  out.write(header.finish());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    SectionBuilder layer(kLayerTag);
    put_layer(layer, static_cast<uint32_t>(l), a.layers[l]);
    out.write(layer.finish());
  }
  out.commit();
}

CalibrationArtifact parse_calibration(std::span<const uint8_t> bytes) {
  file_io::check_header(bytes, kMagic, kCalibrationFormatVersion, "calibration artifact");
  file_io::SectionCursor cursor(bytes, kHeader);
  CalibrationArtifact a;
  a.model = file_io::read_model(cursor.next(kModelTag, "the model section (MODL)"));
  PayloadReader header = cursor.next(kCalibrationTag, "the calibration section (CALB)");
  a.spec = header.read_string("the spec");
  const uint32_t layers = header.read<uint32_t>("the layer count");
  a.kv_heads = header.read<uint32_t>("the KV head count");
  a.head_dim = header.read<uint32_t>("the head_dim");
  a.tokens = header.read<uint64_t>("the calibration token count");
  header.expect_end();
  if (layers != a.model.layers || a.kv_heads != a.model.kv_heads || a.head_dim != a.model.head_dim) {
    throw FormatError(fmt::format("the calibration section describes {} layers of {} KV heads x {}; "
                                  "expected the model's {} x {} x {}", layers, a.kv_heads, a.head_dim,
                                  a.model.layers, a.model.kv_heads, a.model.head_dim));
  }
  for (uint32_t l = 0; l < layers; ++l) {
    a.layers.push_back(read_layer(cursor.next(kLayerTag, fmt::format("layer {} (LAYR)", l)), l, a.kv_heads));
  }
  cursor.expect_end("the last layer");
  return a;
}

std::shared_ptr<const CalibrationArtifact> load_calibration(const std::string& dir, const Spec& spec) {
  const std::string path = calibration_path(dir, spec.method->name);
  std::error_code ec;
  if (path.find('\0') == std::string::npos && !std::filesystem::exists(path, ec)) {
    throw Error(fmt::format("{}: no calibration artifact '{}'; make one with `veloxquant calibrate "
                            "-m MODEL -f TEXT --kv {} -o {}`", spec.method->name, path,
                            calibrated_spec_text(spec), dir));
  }
  std::vector<uint8_t> bytes;
  try {
    bytes = file_io::read_file(path);
  } catch (const Error& e) {
    throw Error(fmt::format("{}: calibration artifact '{}': {}", spec.method->name, file_io::shown_path(path),
                            e.what()));
  }
  auto artifact = std::make_shared<CalibrationArtifact>();
  try {
    *artifact = parse_calibration(bytes);
  } catch (const FormatError& e) {
    throw FormatError(fmt::format("calibration artifact '{}': {}", path, e.what()));
  }
  artifact->file_name = std::filesystem::path(path).filename().string();
  artifact->file_bytes = bytes.size();
  artifact->file_xxh64 = xxhash64(bytes);
  const std::string wanted = calibrated_spec_text(spec);
  if (artifact->spec != wanted) {
    throw Error(fmt::format("calibration artifact '{}' was fitted for '{}'; expected '{}' (calibrate "
                            "again with this spec)", path, artifact->spec, wanted));
  }
  return artifact;
}

}  // namespace veloxquant
