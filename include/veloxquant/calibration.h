// Calibration: methods with learned parameters (codebooks, ranges, rotations, sensitivities) fit
// them once to a model's real keys and values, gathered by running the model over text
// (calibrate.h), and keep them in an artifact file that specs load with `artifacts=DIR`. The
// format, byte by byte, and what is refused: docs/calibration.md.
//
// A calibrated method declares MethodInfo::fit (method.h): it turns one layer's samples into
// named float tables per KV head, and its make() reads them back through layer_calibration().
// The store knows nothing of what the tables mean, so a new calibrated method adds only its fit
// and its make.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "veloxquant/method.h"
#include "veloxquant/model_identity.h"

namespace veloxquant {

// The only artifact format version this build writes and reads.
inline constexpr uint32_t kCalibrationFormatVersion = 1;

// What one layer's caches were handed over the calibration text, as their codecs see it: keys
// after RoPE (the cache rotates keys before it encodes them), or before it for a method that
// stores them so (MethodInfo::keys_before_rope), and values, [tokens, kv_heads, head_dim]
// row-major.
struct CalibrationSamples {
  std::span<const float> keys, values;
  size_t tokens = 0, kv_heads = 0, head_dim = 0;
  // The samples are consecutive sequences of this many tokens, each starting with BOS (its
  // attention sink); 0: one sequence.
  size_t sequence = 0;
};

// A method's fitted parameters for one layer: per KV head, named tables of floats.
struct LayerCalibration {
  std::vector<std::map<std::string, std::vector<float>, std::less<>>> heads;
  // Throws FormatError naming the table when head `head` lacks it or it holds another count than
  // `expected` floats (an artifact written by another version of the method).
  std::span<const float> table(size_t head, std::string_view name, size_t expected) const;
};

struct CalibrationArtifact {
  std::string spec;  // canonical spec the tables were fitted for, without artifacts=
  ModelIdentity model;
  uint32_t kv_heads = 0, head_dim = 0;
  uint64_t tokens = 0;  // calibration tokens the tables were fitted to
  std::vector<LayerCalibration> layers;
  // The file it was read from (load_calibration): its name in DIR, size and XXH64, which session
  // files record so that a session is restored only with the artifact it was saved with. Empty
  // and 0 for an artifact built in memory.
  std::string file_name;
  uint64_t file_bytes = 0, file_xxh64 = 0;
};

// Canonical text of `spec`'s quantizer without its artifacts= parameter: what an artifact records
// and what a spec must equal to load it.
std::string calibrated_spec_text(const Spec& spec);

// Where an artifact for `method` lives in DIR: DIR/METHOD.vqcal.
std::string calibration_path(const std::string& dir, std::string_view method);
// Writes DIR/METHOD.vqcal atomically (creating DIR when missing). Throws Error when it cannot.
void save_calibration(const CalibrationArtifact& artifact, const std::string& dir);
// Reads and checks a whole artifact image: magic, version, every section's length and XXH64,
// every count against the bytes present, finite tables. Throws FormatError naming the problem.
CalibrationArtifact parse_calibration(std::span<const uint8_t> bytes);
// Reads DIR's artifact for `spec`'s method; errors name the file. Throws Error when `spec` was
// not the spec the artifact was fitted for.
std::shared_ptr<const CalibrationArtifact> load_calibration(const std::string& dir, const Spec& spec);

// `shape` with shape.calibration loaded from `spec`'s artifacts= directory when the method is
// calibrated, has no calibration yet and names a directory; else `shape` unchanged. The
// directory's precomputed tables (precomputed.h) are loaded too: for a method that is not
// calibrated, artifacts=DIR names them alone and they must be there. KVCache builds its codecs
// through this, so every cache of a spec finds its tables.
LayerShape with_calibration(const Spec& spec, LayerShape shape);
// The fitted tables of layer shape.layer, from shape.calibration. Throws Error saying how to
// calibrate when there is none, and naming the mismatch when the artifact was made for another
// method or spec, layer count, KV head count or head_dim.
const LayerCalibration& layer_calibration(std::string_view method, const Params& params,
                                          const LayerShape& shape);
// Throws Error naming every field that differs when `artifact` was fitted to another model.
void check_calibration_model(const CalibrationArtifact& artifact, const ModelIdentity& model);

// An artifact fitted to `samples` alone, the same tables for each of `layers` layers, with no
// model behind it (its identity names the architecture "samples"): for tools and tests that build
// a calibrated method's codecs without a model (`veloxquant methods` and `bench`, the conformance
// suite). Throws SpecError when the method has no fit.
std::shared_ptr<const CalibrationArtifact> calibrate_on_samples(const Spec& spec,
                                                                const CalibrationSamples& samples,
                                                                int layers = 1);

}  // namespace veloxquant
