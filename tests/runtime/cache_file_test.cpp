// Cache files (save_caches / load_caches): caches without a model round-trip byte for byte, lone
// or as a cross-layer group, and damaged or inconsistent files and lists are refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "expect_error.h"
#include "test_data.h"
#include "veloxquant/cache.h"
#include "veloxquant/error.h"
#include "veloxquant/session_file.h"

namespace veloxquant {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("vq_cache_file_" + std::to_string(::getpid()) + "_" + name)).string();
}

void fill(KVCache& cache, size_t tokens, uint64_t seed) {
  const size_t h = cache.kv_heads(), d = cache.head_dim();
  const std::vector<float> k = test::gaussian(tokens * h * d, seed), v = test::gaussian(tokens * h * d, seed + 1);
  cache.append(TensorView::f32(k.data(), {tokens, h, d}), TensorView::f32(v.data(), {tokens, h, d}));
}

void expect_same(const KVCache& a, const KVCache& b) {
  EXPECT_EQ(a.spec().to_string(), b.spec().to_string());
  EXPECT_EQ(a.tokens(), b.tokens());
  EXPECT_EQ(a.key_bytes(), b.key_bytes());
  EXPECT_EQ(a.value_bytes(), b.value_bytes());
  for (size_t h = 0; h < a.kv_heads(); ++h) {
    EXPECT_EQ(a.key_streams()[h].codes, b.key_streams()[h].codes);
    EXPECT_EQ(a.key_streams()[h].tail, b.key_streams()[h].tail);
    EXPECT_EQ(a.value_streams()[h].codes, b.value_streams()[h].codes);
  }
  const size_t q_heads = 2 * a.kv_heads(), d = a.head_dim();
  const std::vector<float> q = test::gaussian(q_heads * d, 99);
  std::vector<float> out_a(q.size()), out_b(q.size());
  a.attend(TensorView::f32(q.data(), {1, q_heads, d}), out_a.data());
  b.attend(TensorView::f32(q.data(), {1, q_heads, d}), out_b.data());
  EXPECT_EQ(out_a, out_b);
}

TEST(CacheFile, ALoneCacheRoundTripsByteForByte) {
  for (const char* spec : {"kivi", "turboquant_mse:bits=3", "rabitq", "cachegen", "svdq"}) {
    KVCache cache(spec, LayerShape{2, 64, 5, 7, 12});
    fill(cache, 300, 1);
    const std::string path = temp_path("lone");
    save_caches(std::span(&cache, 1), path);
    std::vector<KVCache> loaded = load_caches(path);
    ASSERT_EQ(loaded.size(), 1u) << spec;
    EXPECT_EQ(loaded[0].shape().layer, 5);
    EXPECT_EQ(loaded[0].shape().seed, 7u);
    expect_same(cache, loaded[0]);
    // It keeps working: appends after the load encode as the original does.
    fill(cache, 40, 3);
    fill(loaded[0], 40, 3);
    expect_same(cache, loaded[0]);
    fs::remove(path);
  }
}

TEST(CacheFile, ACrossLayerGroupIsSavedWholeAndPairedAgain) {
  std::vector<KVCache> layers = make_layer_caches(parse_spec("xquant"), LayerShape{2, 64, 0, 3}, 4);
  for (size_t l = 0; l < layers.size(); ++l) fill(layers[l], 260, 10 + l);
  for (KVCache& c : layers) c.finish_step();
  const std::string path = temp_path("group");
  save_caches(layers, path);
  const std::vector<KVCache> loaded = load_caches(path);
  ASSERT_EQ(loaded.size(), 4u);
  for (size_t l = 0; l < layers.size(); ++l) {
    EXPECT_TRUE(loaded[l].cross_layer());
    expect_same(layers[l], loaded[l]);
  }
  EXPECT_CONTAINS(test::error_message<Error>([&] { save_caches(std::span(layers.data(), 1), path); }),
                  "1 of the 4 layers");
  fs::remove(path);
}

TEST(CacheFile, WhatCannotBeSavedIsRefused) {
  const std::string path = temp_path("refused");
  EXPECT_CONTAINS(test::error_message<Error>([&] { save_caches(std::span<const KVCache>(), path); }), "no cache");
  KVCache evicting("snapkv:budget=64+kivi", LayerShape{1, 64, 0, 0});
  fill(evicting, 40, 1);
  EXPECT_CONTAINS(test::error_message<Error>([&] { save_caches(std::span(&evicting, 1), path); }), "evicts");
  std::vector<KVCache> mixed = make_layer_caches(parse_spec("kivi"), LayerShape{1, 64, 0, 0}, 2);
  fill(mixed[0], 10, 1);
  EXPECT_CONTAINS(test::error_message<Error>([&] { save_caches(mixed, path); }), "cache 1 is layer 1");
  EXPECT_FALSE(fs::exists(path));
}

TEST(CacheFile, DamagedFilesAreRefusedNamingTheFile) {
  KVCache cache("kivi", LayerShape{2, 64, 0, 0});
  fill(cache, 200, 1);
  const std::string path = temp_path("damaged"), bad = temp_path("damaged_copy");
  save_caches(std::span(&cache, 1), path);
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const auto write_bad = [&](const std::vector<char>& b) {
    std::ofstream(bad, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size()));
  };
  for (size_t at = 0; at < bytes.size(); at += 97) {
    std::vector<char> flipped = bytes;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x5a);
    write_bad(flipped);
    SCOPED_TRACE("byte " + std::to_string(at));
    EXPECT_CONTAINS(test::error_message<Error>([&] { load_caches(bad); }), "cache file '" + bad + "'");
  }
  for (size_t keep : {size_t{0}, size_t{11}, bytes.size() / 2, bytes.size() - 1}) {
    write_bad(std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(keep)));
    EXPECT_THROW(load_caches(bad), FormatError) << "truncated to " << keep;
  }
  std::vector<char> longer = bytes;
  longer.push_back(0);
  write_bad(longer);
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { load_caches(bad); }), "unexpected bytes");
  EXPECT_CONTAINS(test::error_message<Error>([&] { load_caches(temp_path("missing")); }), "cannot open it");
  fs::remove(path);
  fs::remove(bad);
}

}  // namespace
}  // namespace veloxquant
