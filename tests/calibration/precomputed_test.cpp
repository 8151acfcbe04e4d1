// Precomputed tables (veloxquant/precomputed.h): what `precompute` writes is what the codecs
// compute, byte for byte; caches with artifacts=DIR compute nothing and store the same codes;
// damaged or missing files are refused with their reason.
#include "core/precomputed.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "calibration/precomputed_file.h"
#include "expect_error.h"
#include "runtime/session_file_helpers.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/precomputed.h"

namespace veloxquant {
namespace {

using test::TempDir;

// Every kind of table: dense (96) and Hadamard (128) rotations, both sketches, both codebooks.
PrecomputeRequest request() {
  PrecomputeRequest r;
  r.specs = {"turboquant_prod:bits=3", "turboquant_rvq:bits=2", "qjl:proj=64,outlier_proj=32", "polar"};
  r.head_dims = {96, 128};
  r.layers = 2;
  return r;
}

// The tables building these caches computes, with nothing loaded.
Tables computed_tables(const PrecomputeRequest& r) {
  forget_loaded_tables();
  start_recording();
  for (const std::string& spec : r.specs)
    for (size_t d : r.head_dims)
      for (int layer = 0; layer < r.layers; ++layer) {
        const KVCache cache(spec,
                            LayerShape{.kv_heads = 1, .head_dim = d, .layer = layer, .layers = r.layers});
      }
  return stop_recording();
}

// Keys and values of a cache after random appends, as stored.
std::vector<std::vector<uint8_t>> stored_codes(const std::string& spec, size_t head_dim, int layer) {
  KVCache cache(spec, LayerShape{.kv_heads = 2, .head_dim = head_dim, .layer = layer, .layers = 2});
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> k(300 * 2 * head_dim), v(k.size());
  for (float& x : k) x = normal(rng);
  for (float& x : v) x = normal(rng);
  cache.append(TensorView::f32(k.data(), {300, 2, head_dim}), TensorView::f32(v.data(), {300, 2, head_dim}));
  std::vector<std::vector<uint8_t>> out;
  for (const auto* streams : {&cache.key_streams(), &cache.value_streams()})
    for (const CacheStream& s : *streams) out.push_back(s.codes);
  return out;
}

TEST(Precomputed, WritesExactlyTheTablesTheCodecsCompute) {
  TempDir dir;
  const PrecomputeRequest r = request();
  const PrecomputeReport report = precompute_tables(r, dir.path.string());
  const Tables file = parse_precomputed(test::file_bytes(precomputed_path(dir.path.string())));
  const Tables fresh = computed_tables(r);
  EXPECT_EQ(report.tables, fresh.size());
  EXPECT_EQ(report.added, fresh.size());
  ASSERT_EQ(file.size(), fresh.size());
  std::set<TableKind> kinds;
  for (const auto& [key, table] : fresh) {
    kinds.insert(key.kind);
    const auto it = file.find(key);
    ASSERT_NE(it, file.end()) << describe_table(key);
    EXPECT_EQ(it->second, table) << describe_table(key);
  }
  EXPECT_EQ(kinds.size(), 4u) << "every kind of table is covered";
  // A second run over the same request adds nothing; another head_dim adds its own.
  EXPECT_EQ(precompute_tables(r, dir.path.string()).added, 0u);
  PrecomputeRequest more = r;
  more.head_dims = {64};
  EXPECT_GT(precompute_tables(more, dir.path.string()).added, 0u);
  Tables both = fresh;
  both.merge(computed_tables(more));  // the Gaussian codebooks do not depend on head_dim
  EXPECT_EQ(parse_precomputed(test::file_bytes(precomputed_path(dir.path.string()))), both);
}

TEST(Precomputed, CachesWithTheTablesComputeNoneAndStoreTheSameCodes) {
  TempDir dir;
  const std::string d = dir.path.string();
  precompute_tables(request(), d);
  forget_loaded_tables();
  for (const std::string& spec : request().specs) {
    const auto plain = stored_codes(spec, 96, 1);
    const size_t before = table_counts().computed;
    Spec with_tables = parse_spec(spec);
    with_tables.params.strings["artifacts"] = d;
    const auto loaded = stored_codes(with_tables.to_string(), 96, 1);
    EXPECT_EQ(table_counts().computed, before) << spec << " computed a table it was handed";
    EXPECT_EQ(loaded, plain) << spec;
  }
  forget_loaded_tables();
}

TEST(Precomputed, RefusesMissingDamagedAndOtherVersionFiles) {
  TempDir dir;
  const std::string d = dir.path.string();
  EXPECT_CONTAINS(test::error_message<Error>(
                      [&] { const KVCache c("turboquant_mse:artifacts=" + d, LayerShape{}); }),
                  "veloxquant precompute");
  PrecomputeRequest r;
  r.specs = {"turboquant_mse:bits=2"};
  r.head_dims = {96};
  precompute_tables(r, d);
  const std::string path = precomputed_path(d);
  const std::vector<uint8_t> good = test::file_bytes(path);
  ASSERT_GT(good.size(), 40u);

  std::vector<uint8_t> flipped = good;
  flipped[good.size() - 20] ^= 0x01;  // inside the last table
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { parse_precomputed(flipped); }), "is corrupt");
  std::vector<uint8_t> version = good;
  version[8] = 7;
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { parse_precomputed(version); }), "format version 7");
  std::vector<uint8_t> truncated(good.begin(), good.end() - 5);
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { parse_precomputed(truncated); }), "truncated");
  std::vector<uint8_t> other(good);
  other[0] = 'X';
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { parse_precomputed(other); }), "VQTABLE");

  // Loading names the file; a damaged file is never used.
  test::write_bytes(path, flipped);
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { load_precomputed(d); }), path);
  forget_loaded_tables();
}

TEST(Precomputed, RefusesADirectoryAndAPathHoldingANulByte) {
  // Found by the spec fuzzer: "polar:bits=2,artifacts=/\0..." read the root directory (the
  // system saw the path up to the NUL), and the failed read escaped as std::ios_base::failure.
  TempDir dir;
  std::filesystem::create_directory(precomputed_path(dir.path.string()));
  EXPECT_CONTAINS(test::error_message<Error>([&] { load_precomputed(dir.path.string()); }),
                  "it is a directory; expected a file");
  const std::string nul = dir.path.string() + std::string(1, '\0') + "x";
  EXPECT_CONTAINS(test::error_message<Error>(
                      [&] { const KVCache c("polar:bits=2,artifacts=" + nul, LayerShape{}); }),
                  "its path holds a NUL byte");
  forget_loaded_tables();
}

TEST(Precomputed, RefusesRequestsWithoutSpecsOrShapes) {
  TempDir dir;
  PrecomputeRequest r;
  EXPECT_CONTAINS(test::error_message<SpecError>([&] { precompute_tables(r, dir.path.string()); }), "--kv");
  r.specs = {"turboquant_mse"};
  r.layers = 0;
  EXPECT_CONTAINS(test::error_message<Error>([&] { precompute_tables(r, dir.path.string()); }), "layers 0");
  r.layers = 1;
  r.specs = {"nope"};
  EXPECT_CONTAINS(test::error_message<SpecError>([&] { precompute_tables(r, dir.path.string()); }), "nope");
}

}  // namespace
}  // namespace veloxquant
