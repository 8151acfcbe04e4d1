// Session files end to end: every method's caches survive a save and a restore byte for byte, a
// restored session continues exactly as the uninterrupted one, and loading into another model,
// another method, another format version or too small a context is refused with a message naming
// what differs, before the session changes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>

#include "calibrated_specs.h"
#include "expect_error.h"
#include "session_file_helpers.h"
#include "veloxquant/method.h"

namespace veloxquant {
namespace {

using test::TempDir;

std::vector<std::string> method_names() {
  std::vector<std::string> names;
  for (const MethodInfo& m : registered_methods()) names.push_back(m.name);
  return names;
}

void expect_same_streams(const std::vector<CacheStream>& a, const std::vector<CacheStream>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t h = 0; h < a.size(); ++h) {
    EXPECT_EQ(a[h].encoded, b[h].encoded) << "KV head " << h;
    EXPECT_EQ(a[h].tail_tokens, b[h].tail_tokens) << "KV head " << h;
    EXPECT_TRUE(a[h].codes == b[h].codes) << "KV head " << h;
    EXPECT_TRUE(a[h].tail == b[h].tail) << "KV head " << h;
  }
}

void expect_same_caches(const Session& a, const Session& b) {
  ASSERT_EQ(a.caches().size(), b.caches().size());
  for (size_t l = 0; l < a.caches().size(); ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    expect_same_streams(a.caches()[l].key_streams(), b.caches()[l].key_streams());
    expect_same_streams(a.caches()[l].value_streams(), b.caches()[l].value_streams());
  }
}

// Evaluates `prompt` (plus `decoded` greedy steps), saves, restores into a new session and checks
// that the restored session holds the same bytes and continues with the same 16 greedy tokens.
void expect_exact_round_trip(const Model& model, const std::string& spec,
                             const std::vector<int32_t>& prompt, size_t decoded = 0) {
  SCOPED_TRACE(spec);
  TempDir dir;
  Session original(model, {spec, 0});
  std::vector<float> logits = original.eval(prompt);
  for (size_t i = 0; i < decoded; ++i) {
    const int32_t t = test::argmax(logits);
    logits = original.eval(std::span(&t, 1));
  }
  save_session(original, logits, dir.file("s.vqs"));
  Session restored(model, {spec, 0});
  const std::vector<float> restored_logits = restore_session(restored, read_session_file(dir.file("s.vqs")));
  EXPECT_EQ(restored_logits, logits);
  EXPECT_TRUE(std::ranges::equal(restored.tokens(), original.tokens()));
  EXPECT_EQ(restored.position(), prompt.size() + decoded);
  EXPECT_EQ(restored.kv_bytes(), original.kv_bytes());
  expect_same_caches(original, restored);
  EXPECT_EQ(test::greedy(restored, restored_logits, 16), test::greedy(original, logits, 16));
}

TEST(SessionFile, EveryMethodRoundTripsAndContinuesExactlyOnStories) {
  const std::vector<int32_t> prompt = test::stories_prompt();
  for (const std::string& name : method_names()) {
    expect_exact_round_trip(test::stories_model(), test::runnable_spec(test::stories_model(), name), prompt);
  }
  // A small residual window, so that most tokens are in encoded blocks: for the cross-layer
  // methods, blocks shared by pairs of layers (stories260K's 5 layers: two pairs and one alone).
  expect_exact_round_trip(test::stories_model(), "kivi:residual=16", prompt);
  expect_exact_round_trip(test::stories_model(), "xquant:residual=16", prompt);
  expect_exact_round_trip(test::stories_model(), "minicache:residual=16,start=0", prompt);
}

TEST(SessionFile, EveryMethodRoundTripsAndContinuesExactlyOnFixtures) {
  for (const char* arch : {"llama", "qwen2"}) {
    SCOPED_TRACE(arch);
    const Model model = test::fixture_model(arch, 1);
    for (const std::string& name : method_names())
      expect_exact_round_trip(model, test::runnable_spec(model, name), test::long_prompt(model, 100), /*decoded=*/3);
  }
}

TEST(SessionFile, TheSameModelHasTheSameIdentity) {
  const Model again = Model::load(test::stories_path());
  EXPECT_EQ(model_identity(again), model_identity(test::stories_model()));
  EXPECT_EQ(describe_differences(model_identity(again), model_identity(test::stories_model())), "");
}

// A session of `tokens` prompt tokens of `model`, saved to `path`.
void save_prompt(const Model& model, const std::string& spec, size_t tokens, const std::string& path) {
  Session s(model, {spec, 0});
  save_session(s, s.eval(test::long_prompt(model, tokens)), path);
}

TEST(SessionFile, AnotherModelIsRefusedNamingTheShapesThatDiffer) {
  TempDir dir;
  save_prompt(test::stories_model(), "fp16", 20, dir.file("s.vqs"));
  Session other(test::fixture_model("llama", 1));
  const std::string msg = test::error_message<Error>(
      [&] { restore_session(other, read_session_file(dir.file("s.vqs"))); });
  EXPECT_CONTAINS(msg, "the session was saved with another model: layers: expected 2, found 5; "
                       "heads: expected 4, found 8; kv_heads: expected 2, found 4; head_dim: "
                       "expected 16, found 8;");
  EXPECT_CONTAINS(msg, "weights hash: expected 0x");
  EXPECT_EQ(other.position(), 0u);
}

TEST(SessionFile, AnotherCheckpointOfTheSameShapeIsRefusedByTheWeightsHash) {
  TempDir dir;
  save_prompt(test::fixture_model("llama", 1), "fp16", 20, dir.file("s.vqs"));
  const Model other_weights = test::fixture_model("llama", 2);
  const ModelIdentity expected = model_identity(other_weights);
  const ModelIdentity found = model_identity(test::fixture_model("llama", 1));
  Session other(other_weights);
  EXPECT_EQ(test::error_message<Error>([&] { restore_session(other, read_session_file(dir.file("s.vqs"))); }),
            fmt::format("the session was saved with another model: weights hash: expected 0x{:016x}, "
                        "found 0x{:016x}", expected.weights_hash, found.weights_hash));
}

TEST(SessionFile, AnotherTokenizerIsRefusedByTheTokenizerHash) {
  TempDir dir;
  save_prompt(test::stories_model(), "fp16", 20, dir.file("s.vqs"));
  test::GgufContents edited(test::stories_model().file());
  edited.set("tokenizer.chat_template", GgufValue("{{ messages }}"));
  Session other(Model::from_gguf(edited.build()));
  EXPECT_CONTAINS(test::error_message<Error>([&] { restore_session(other, read_session_file(dir.file("s.vqs"))); }),
                  "tokenizer hash: expected 0x");
}

TEST(SessionFile, AnotherSpecIsRefusedNamingBoth) {
  TempDir dir;
  save_prompt(test::stories_model(), "kivi:residual=16", 20, dir.file("s.vqs"));
  Session other(test::stories_model(), {"fp16", 0});
  EXPECT_EQ(test::error_message<Error>([&] { restore_session(other, read_session_file(dir.file("s.vqs"))); }),
            "the session was saved with another kv spec: expected 'fp16' (seed 0), found "
            "'kivi:kbits=2,vbits=2,group=32,residual=16' (seed 0)");
  Session same_method_other_params(test::stories_model(), {"kivi", 0});
  EXPECT_CONTAINS(test::error_message<Error>([&] {
    restore_session(same_method_other_params, read_session_file(dir.file("s.vqs")));
  }), "expected 'kivi:kbits=2,vbits=2,group=32,residual=128' (seed 0), found");
}

TEST(SessionFile, AnotherFormatVersionIsRefused) {
  TempDir dir;
  save_prompt(test::stories_model(), "fp16", 20, dir.file("s.vqs"));
  std::vector<uint8_t> bytes = test::file_bytes(dir.file("s.vqs"));
  const uint32_t version = 1;  // the format before streams held fitted state
  std::memcpy(bytes.data() + 8, &version, 4);
  EXPECT_EQ(test::error_message<FormatError>([&] { parse_session_file(bytes); }),
            "format version 1; expected version 2, the only one this build reads");
  test::write_bytes(dir.file("v1.vqs"), bytes);
  EXPECT_EQ(test::error_message<FormatError>([&] { read_session_file(dir.file("v1.vqs")); }),
            "session file '" + dir.file("v1.vqs") +
                "': format version 1; expected version 2, the only one this build reads");
}

TEST(SessionFile, ADirectoryOrAMissingFileIsRefusedByName) {
  TempDir dir;
  EXPECT_EQ(test::error_message<Error>([&] { read_session_file(dir.path.string()); }),
            "session file '" + dir.path.string() + "': it is a directory; expected a file");
  EXPECT_EQ(test::error_message<Error>([&] { read_session_file(dir.file("none.vqs")); }),
            "session file '" + dir.file("none.vqs") + "': cannot open it: No such file or directory");
}

TEST(SessionFile, MoreTokensThanTheContextAreRefused) {
  TempDir dir;
  save_prompt(test::stories_model(), "fp16", 40, dir.file("s.vqs"));
  Session small(test::stories_model(), {"fp16", 32});
  EXPECT_EQ(test::error_message<Error>([&] { restore_session(small, read_session_file(dir.file("s.vqs"))); }),
            "the session holds 40 tokens; expected at most the context's 32");
}

TEST(SessionFile, ARefusedRestoreLeavesTheSessionAsItWas) {
  TempDir dir;
  const Model& model = test::stories_model();
  save_prompt(model, "kivi", 30, dir.file("kivi.vqs"));
  Session s(model, {"fp16", 0});
  const std::vector<int32_t> prompt = test::long_prompt(model, 12);
  const std::vector<float> logits = s.eval(prompt);
  EXPECT_THROW(restore_session(s, read_session_file(dir.file("kivi.vqs"))), Error);
  EXPECT_TRUE(std::ranges::equal(s.tokens(), prompt));
  Session fresh(model, {"fp16", 0});
  const std::vector<float> fresh_logits = fresh.eval(prompt);
  EXPECT_EQ(test::greedy(s, logits, 8), test::greedy(fresh, fresh_logits, 8));
}

TEST(SessionFile, SavingNeedsTokensAndTheLastLogits) {
  TempDir dir;
  Session s(test::stories_model());
  EXPECT_EQ(test::error_message<Error>([&] { save_session(s, {}, dir.file("s.vqs")); }),
            "save_session: the session holds no tokens; expected at least 1");
  s.eval(test::long_prompt(test::stories_model(), 4));
  EXPECT_EQ(test::error_message<Error>([&] { save_session(s, std::vector<float>(3), dir.file("s.vqs")); }),
            "save_session got 3 logits; expected the vocab's 512 (what eval returned for the last token)");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path)) << "no file and no temporary file is left";
}

}  // namespace
}  // namespace veloxquant
