// The calibration pass and the artifact store: an artifact reads back as written, and one that is
// damaged, or was made for another model, method, spec, layer count, KV head count or head_dim,
// is refused with a message naming what differs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "eval/synthetic_kv.h"
#include "expect_error.h"
#include "runtime/calibrated_specs.h"
#include "runtime/session_file_helpers.h"
#include "veloxquant/calibrate.h"
#include "veloxquant/error.h"
#include "veloxquant/perplexity.h"

namespace veloxquant {
namespace {

using test::TempDir;

std::shared_ptr<const CalibrationArtifact> synthetic(const std::string& spec, size_t heads, size_t d, int layers) {
  const SyntheticKV w = make_synthetic_kv(300, heads, d, 1, 1, 3);
  return calibrate_on_samples(parse_spec(spec), {w.keys, w.values, w.tokens, heads, d, 0}, layers);
}

TEST(Calibration, AnArtifactReadsBackAsWritten) {
  TempDir dir;
  const auto a = synthetic("kvquant_nuq:bits=4", 2, 64, 3);
  save_calibration(*a, dir.path.string());
  const std::string path = calibration_path(dir.path.string(), "kvquant_nuq");
  EXPECT_TRUE(std::filesystem::exists(path)) << path;
  const auto b = load_calibration(dir.path.string(), parse_spec("kvquant_nuq:bits=4,artifacts=x"));
  EXPECT_EQ(b->spec, a->spec);
  EXPECT_EQ(b->model, a->model);
  EXPECT_EQ(b->tokens, 300u);
  ASSERT_EQ(b->layers.size(), 3u);
  for (size_t l = 0; l < 3; ++l) EXPECT_EQ(b->layers[l].heads, a->layers[l].heads);
  EXPECT_EQ(b->layers[1].table(1, "unrotated_key.levels", 16).size(), 16u);
}

TEST(Calibration, EveryDamagedByteIsRefused) {
  TempDir dir;
  save_calibration(*synthetic("kvquant_nuq", 1, 16, 2), dir.path.string());
  const std::vector<uint8_t> good = test::file_bytes(calibration_path(dir.path.string(), "kvquant_nuq"));
  ASSERT_NO_THROW(parse_calibration(good));
  // A flipped bit anywhere: the magic, the version, a section's framing or its payload.
  for (size_t i = 0; i < good.size(); i += 7) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x10;
    EXPECT_THROW(parse_calibration(bad), FormatError) << "byte " << i;
  }
  for (size_t n : {size_t{0}, size_t{11}, good.size() / 2, good.size() - 1}) {
    EXPECT_THROW(parse_calibration(std::span(good.data(), n)), FormatError) << n << " bytes";
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { parse_calibration(longer); }), "unexpected bytes");
  std::vector<uint8_t> payload = good;
  payload[payload.size() - 9] ^= 1;  // the last byte of the last table, checksum left as it was
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { parse_calibration(payload); }), "corrupt");
}

TEST(Calibration, AnotherShapeOrSpecIsRefusedNamingIt) {
  const auto a = synthetic("kvquant_nuq", 2, 64, 3);
  const Spec spec = parse_spec("kvquant_nuq");
  auto build = [&](LayerShape shape) {
    shape.calibration = a;
    return test::error_message<Error>([&] { (void)spec.method->make(spec.params, shape); });
  };
  EXPECT_EQ(build(LayerShape{2, 64, 1, 0, 3}), "");
  EXPECT_CONTAINS(build(LayerShape{2, 128, 1, 0, 3}), "head_dim: artifact 64, cache 128");
  EXPECT_CONTAINS(build(LayerShape{4, 64, 1, 0, 3}), "KV heads: artifact 2, cache 4");
  EXPECT_CONTAINS(build(LayerShape{2, 64, 1, 0, 5}), "layers: artifact 3, cache 5");
  LayerShape shape{2, 64, 0, 0, 3};
  shape.calibration = a;
  const Spec other = parse_spec("kvquant_nuq:bits=2");
  EXPECT_CONTAINS(test::error_message<Error>([&] { (void)other.method->make(other.params, shape); }),
                  "method: artifact 'kvquant_nuq:bits=3");
}

TEST(Calibration, ASpecOtherThanTheFittedOneIsRefusedOnLoad) {
  TempDir dir;
  save_calibration(*synthetic("kvquant_nuq:bits=3", 1, 16, 1), dir.path.string());
  const std::string message = test::error_message<Error>(
      [&] { KVCache cache("kvquant_nuq:bits=4,artifacts=" + dir.path.string(), LayerShape{1, 16, 0, 0}); });
  EXPECT_CONTAINS(message, "was fitted for 'kvquant_nuq:bits=3");
  EXPECT_CONTAINS(message, "expected 'kvquant_nuq:bits=4");
  // A cache of the fitted spec and shape loads it.
  EXPECT_NO_THROW(KVCache("kvquant_nuq:bits=3,artifacts=" + dir.path.string(), LayerShape{1, 16, 0, 0}));
}

TEST(Calibration, AMissingArtifactSaysHowToMakeIt) {
  TempDir dir;
  const std::string message = test::error_message<Error>(
      [&] { KVCache cache("kvquant_nuq:artifacts=" + dir.file("none"), LayerShape{1, 16, 0, 0}); });
  EXPECT_CONTAINS(message, "no calibration artifact");
  EXPECT_CONTAINS(message, "veloxquant calibrate");
}

// A directory name the file system refuses (a component past 255 bytes) is a missing artifact,
// not a std::filesystem exception out of the cache's constructor (found by fuzz_spec).
TEST(Calibration, AnUnusableDirectoryNameIsAMissingArtifact) {
  const std::string dir(300, 'x');
  const std::string message = test::error_message<Error>([&] {
    KVCache cache("kvquant_nuq:artifacts=" + dir, LayerShape{1, 16, 0, 0});
  });
  EXPECT_CONTAINS(message, "no calibration artifact");
}

TEST(Calibration, AnArtifactThatIsADirectoryIsRefusedByName) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("kvquant_nuq.vqcal"));
  EXPECT_CONTAINS(test::error_message<Error>([&] {
                    KVCache cache("kvquant_nuq:artifacts=" + dir.path.string(), LayerShape{1, 16, 0, 0});
                  }),
                  "calibration artifact '" + dir.file("kvquant_nuq.vqcal") + "': it is a directory");
}

TEST(Calibration, OnlyCalibratedMethodsCalibrate) {
  EXPECT_CONTAINS(test::error_message<SpecError>([] { synthetic("kivi", 1, 16, 1); }), "kvquant_nuq");
  EXPECT_FALSE(find_method("kivi").calibrated());
  EXPECT_TRUE(find_method("kvquant_nuq").calibrated());
}

TEST(Calibration, ArtifactsAreATextParameter) {
  const Spec s = parse_spec("kvquant_nuq:artifacts=some/dir");
  EXPECT_EQ(s.params.get_text("artifacts"), "some/dir");
  EXPECT_EQ(parse_spec(s.to_string()), s);
  EXPECT_EQ(calibrated_spec_text(s), parse_spec("kvquant_nuq").to_string());
  EXPECT_CONTAINS(test::error_message<SpecError>([] { parse_spec("kvquant_nuq:artifacts=a=b"); }), "artifacts=a=b");
}

// The whole path on a real model: calibrate on one text, load in a session, run, and refuse the
// artifact in another model's session.
TEST(Calibration, CalibratesAModelAndRunsItsSessions) {
  TempDir dir;
  const Model& model = test::stories_model();
  std::string train;
  for (int i = 0; i < 8; ++i) {
    train += "The cat sat by the window and watched the birds. The sun was warm and the day was long. ";
  }
  const CalibrationArtifact a = calibrate(model, train, parse_spec("kvquant_nuq"), {.context = 64, .max_tokens = 0});
  EXPECT_EQ(a.layers.size(), model.config().layers);
  EXPECT_EQ(a.tokens % 64, 0u);
  EXPECT_EQ(a.model, model_identity(model));
  save_calibration(a, dir.path.string());
  const std::string spec = "kvquant_nuq:artifacts=" + dir.path.string();
  Session s(model, {spec, 0});
  const std::vector<float> logits = s.eval(test::stories_prompt());
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LT(s.kv_bytes(), s.kv_fp16_bytes());
  // A saved session lists the artifact; restored with a re-fitted one in its place, it is refused.
  save_session(s, logits, dir.file("s.vqs"));
  EXPECT_EQ(read_session_file(dir.file("s.vqs")).artifacts.size(), 1u);
  {
    Session again(model, {spec, 0});
    EXPECT_EQ(restore_session(again, read_session_file(dir.file("s.vqs"))), logits);
  }
  save_calibration(calibrate(model, train + train, parse_spec("kvquant_nuq"), {.context = 32, .max_tokens = 0}),
                   dir.path.string());
  Session refitted(model, {spec, 0});
  EXPECT_CONTAINS(test::error_message<Error>([&] { restore_session(refitted, read_session_file(dir.file("s.vqs"))); }),
                  "another calibration artifact");
  const Model other = test::fixture_model("llama", 1);
  EXPECT_CONTAINS(test::error_message<Error>([&] { Session t(other, {spec, 0}); }), "made with another model");
  EXPECT_CONTAINS(test::error_message<Error>([&] { calibrate(model, "Once", parse_spec("kvquant_nuq"), {.context = 64}); }),
                  "expected at least one chunk of 64");
}

// A method that stores keys before RoPE (comm_vq) is fitted to pre-RoPE keys: with no EM round,
// its codewords are the origin and rows of the calibration keys, and those rows are the keys the
// fp16 caches received with their rotation undone (R(-t) at position t), not the rotated ones.
TEST(Calibration, AMethodThatStoresKeysBeforeRopeIsFittedToThem) {
  const Model& model = test::stories_model();
  const ModelConfig& c = model.config();
  const std::string train = "The cat sat by the window and watched the birds. The sun was warm and the day was long.";
  const size_t ctx = 16, d = c.head_dim, row = size_t{c.kv_heads} * d, entries = 4;
  const CalibrationArtifact a = calibrate(model, train, parse_spec("comm_vq:codebooks=1,bits=2,iters=0"),
                                          {.context = ctx, .max_tokens = ctx});
  Session s(model, {"fp16", 0});
  std::vector<int32_t> chunk = model.tokenizer().encode(train, true);
  chunk.resize(ctx);
  s.eval(chunk, Logits::None);
  const size_t layer = c.layers - 1;
  const std::vector<float> rotated = s.caches()[layer].decode_keys();
  std::vector<float> before = rotated;
  for (size_t t = 0; t < ctx; ++t) apply_rope(c.rope, before.data() + t * row, c.kv_heads, d, -static_cast<int64_t>(t));
  // The row of `keys` (head 0) that codeword e is, or ctx when none is.
  auto row_of = [&](const std::vector<float>& keys, const float* codeword) {
    for (size_t t = 0; t < ctx; ++t) {
      bool same = true;
      for (size_t i = 0; i < d && same; ++i) same = std::fabs(keys[t * row + i] - codeword[i]) <= 2e-3f * (1 + std::fabs(codeword[i]));
      if (same) return t;
    }
    return ctx;
  };
  const std::span<const float> books = a.layers[layer].table(0, "key.codebooks", entries * d);
  size_t unrotated_rows = 0;
  for (size_t e = 1; e < entries; ++e) {
    const size_t t = row_of(before, books.data() + e * d);
    EXPECT_LT(t, ctx) << "codeword " << e << " is no pre-RoPE key";
    unrotated_rows += t > 0 && row_of(rotated, books.data() + e * d) == ctx;  // token 0 is not rotated
  }
  EXPECT_GT(unrotated_rows, 0u);
}

}  // namespace
}  // namespace veloxquant
