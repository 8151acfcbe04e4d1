// The calibrate pass: runs a model over text, gathers every layer's keys and values as its caches
// see them, and fits a calibrated method's tables to them (calibration.h holds the artifact
// they go into).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "veloxquant/calibration.h"
#include "veloxquant/model.h"

namespace veloxquant {

struct CalibrateOptions {
  size_t context = 512;       // tokens per chunk the model runs (each chunk starts a fresh cache)
  size_t max_tokens = 16384;  // calibration tokens used at most (0: all of the text)
};

// Tokenizes `text`, runs `model` over it in chunks of options.context tokens (BOS first, as
// perplexity does) through fp16 caches, gathers every layer's keys and values, and fits `spec`'s
// method to them layer by layer. Throws SpecError when the method has no fit, Error when the
// text is shorter than one chunk.
CalibrationArtifact calibrate(const Model& model, std::string_view text, const Spec& spec,
                              const CalibrateOptions& options = {});
// The same over token ids (BOS included when the vocabulary adds one). Throws Error when a token
// id is out of the vocabulary's range.
CalibrationArtifact calibrate(const Model& model, std::span<const int32_t> tokens, const Spec& spec,
                              const CalibrateOptions& options = {});

// What calibrate_into() wrote: the artifact, its file and the spec that loads it.
struct SavedCalibration {
  CalibrationArtifact artifact;
  std::string path;  // DIR/METHOD.vqcal
  std::string spec;  // `spec` with artifacts=DIR, for --kv or SessionOptions::kv_spec
};
// calibrate() over `text`, then save_calibration() into `dir`: what `veloxquant calibrate` and the
// Python package's Model.calibrate do. Throws Error when `spec` names artifacts= already (the
// directory written is `dir`).
SavedCalibration calibrate_into(const Model& model, std::string_view text, const Spec& spec,
                                const std::string& dir, const CalibrateOptions& options = {});

}  // namespace veloxquant
