// Precomputed tables: the seeded rotations, Gaussian sketches and Lloyd-Max codebooks that the
// caches of given specs, head dims and layers compute when they are built, written once by
// `veloxquant precompute` into DIR/tables.vqtab and handed to every cache of a spec with
// artifacts=DIR instead of computing them again. They are byte-identical to what the codecs
// compute (tests/calibration/precomputed_test.cpp checks it). The format: docs/calibration.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace veloxquant {

// The only format version this build writes and reads.
inline constexpr uint32_t kPrecomputedFormatVersion = 1;

// DIR/tables.vqtab.
std::string precomputed_path(const std::string& dir);

struct PrecomputeRequest {
  std::vector<std::string> specs;  // e.g. "turboquant_prod:bits=3"; calibrated ones need artifacts=
  std::vector<size_t> head_dims = {128};
  int layers = 1;       // layers 0 .. layers - 1 (each has its own rotation seeds)
  size_t kv_heads = 1;  // a calibrated spec's artifact fixes it; the tables do not depend on it
  uint64_t seed = 0;    // the codec seed (LayerShape::seed; a session's is 0)
};

struct PrecomputeReport {
  size_t tables = 0;  // tables in the file written
  size_t added = 0;   // of them, new to it
  uint64_t file_bytes = 0;
  double compute_seconds = 0;  // building the caches, computing every table
};

// Builds one cache per spec, head_dim and layer, collects every table they compute and writes
// them to DIR/tables.vqtab atomically, with the tables already there (creating DIR when missing).
// Throws SpecError for a bad spec, Error when DIR cannot be written.
PrecomputeReport precompute_tables(const PrecomputeRequest& request, const std::string& dir);

// Makes DIR/tables.vqtab's tables the ones caches use (once per file: a second call with the
// same unchanged file reads nothing). Throws Error naming the path when it is missing, telling how
// to make it; FormatError naming the section when it is corrupt or of another version.
void load_precomputed(const std::string& dir);

}  // namespace veloxquant
