// Damaged session files: a file cut at any byte (every section boundary included) or with any
// byte flipped is refused by the parser, one that parses but holds a cache its codecs could not
// have written is refused before the session changes, and a writer killed midway leaves the
// previous file whole.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "core/xxhash64.h"
#include "expect_error.h"
#include "session_file_helpers.h"
#include "veloxquant/method.h"

namespace veloxquant {
namespace {

using test::TempDir;

// A small session file of the llama fixture (2 layers, 2 KV heads of 16) with encoded blocks and
// an fp16 tail in every stream.
std::vector<uint8_t> small_session_file(const std::string& path) {
  const Model model = test::fixture_model("llama", 1);
  Session s(model, {"kivi:group=32,residual=8", 0});
  save_session(s, s.eval(test::long_prompt(model, 50)), path);
  return test::file_bytes(path);
}

TEST(SessionFileDamage, EveryTruncationIsRefused) {
  TempDir dir;
  const std::vector<uint8_t> bytes = small_session_file(dir.file("s.vqs"));
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::span<const uint8_t> cut(bytes.data(), n);
    EXPECT_THROW(parse_session_file(cut), FormatError) << "cut at byte " << n;
  }
}

TEST(SessionFileDamage, TruncationAtASectionBoundaryNamesTheMissingSection) {
  TempDir dir;
  const std::vector<uint8_t> bytes = small_session_file(dir.file("s.vqs"));
  const SessionFile f = parse_session_file(bytes);
  ASSERT_EQ(f.sections.size(), 7u);  // MODL SPEC ARTF TOKS LGTS and two layers
  const char* expected[] = {"the spec section (SPEC)", "the artifact section (ARTF)",
                            "the token section (TOKS)", "the logits section (LGTS)",
                            "the section of layer 0 (LAYR)", "the section of layer 1 (LAYR)"};
  for (size_t i = 0; i + 1 < f.sections.size(); ++i) {
    const size_t end = f.sections[i].offset + f.sections[i].bytes;
    EXPECT_EQ(test::error_message<FormatError>([&] { parse_session_file(std::span(bytes.data(), end)); }),
              fmt::format("the file ends at byte {} where {} was expected (truncated)", end, expected[i]));
  }
}

TEST(SessionFileDamage, EveryFlippedByteIsRefused) {
  TempDir dir;
  std::vector<uint8_t> bytes = small_session_file(dir.file("s.vqs"));
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}}) {
      bytes[i] ^= mask;
      EXPECT_THROW(parse_session_file(bytes), FormatError) << "byte " << i << " ^ " << int{mask};
      bytes[i] ^= mask;
    }
  }
  EXPECT_NO_THROW(parse_session_file(bytes));
}

TEST(SessionFileDamage, TrailingBytesAreRefused) {
  TempDir dir;
  std::vector<uint8_t> bytes = small_session_file(dir.file("s.vqs"));
  const size_t end = bytes.size();
  bytes.push_back(0);
  EXPECT_EQ(test::error_message<FormatError>([&] { parse_session_file(bytes); }),
            fmt::format("1 unexpected bytes follow the last layer at byte {}; expected the file to end there", end));
}

TEST(SessionFileDamage, ACorruptSectionNamesItsChecksum) {
  TempDir dir;
  std::vector<uint8_t> bytes = small_session_file(dir.file("s.vqs"));
  const SessionFile f = parse_session_file(bytes);
  const SessionSection& layer1 = f.sections.back();
  bytes[layer1.offset + 40] ^= 0x10;
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { parse_session_file(bytes); }),
                  fmt::format("the section of layer 1 (LAYR) at byte {} is corrupt: its XXH64 is 0x", layer1.offset));
}

TEST(SessionFileDamage, NotASessionFileIsRefusedByItsMagic) {
  const std::vector<uint8_t> gguf = test::file_bytes(test::stories_path());
  EXPECT_EQ(test::error_message<FormatError>([&] { parse_session_file(gguf); }),
            "not a VeloxQuant session file: its first 8 bytes are not the magic \"VQSESSN\\0\"");
}

// A file whose checksums are right but whose last layer holds an infinite fp16 value, as only a
// faulty writer could produce: it parses, and restoring it fails at that layer after the earlier
// layers were rebuilt, with the session untouched.
TEST(SessionFileDamage, ACacheItsCodecsCouldNotHaveWrittenIsRefusedBeforeTheSessionChanges) {
  TempDir dir;
  std::vector<uint8_t> bytes = small_session_file(dir.file("s.vqs"));
  const SessionSection last = parse_session_file(bytes).sections.back();
  const size_t payload_end = last.offset + last.bytes - 8;
  bytes[payload_end - 1] = 0x7C;  // the high byte of the last fp16 tail value: +infinity
  bytes[payload_end - 2] = 0x00;
  const uint64_t checksum = xxhash64(std::span(bytes.data() + last.offset, last.bytes - 8));
  std::memcpy(bytes.data() + payload_end, &checksum, 8);
  SessionFile f = parse_session_file(bytes);

  const Model model = test::fixture_model("llama", 1);
  Session s(model, {"kivi:group=32,residual=8", 0});
  const std::vector<int32_t> prompt = test::long_prompt(model, 10);
  s.eval(prompt);
  const size_t bytes_before = s.kv_bytes();
  EXPECT_CONTAINS(test::error_message<FormatError>([&] { restore_session(s, std::move(f)); }),
                  "layer 1: kivi:kbits=2,vbits=2,group=32,residual=8: the value stream of KV head 1 "
                  "has a non-finite fp16 value at tail byte");
  EXPECT_TRUE(std::ranges::equal(s.tokens(), prompt));
  EXPECT_EQ(s.kv_bytes(), bytes_before);
}

// cachegen stores blocks at their coded size, each stating its length (a variable-length codec):
// a file whose checksums are right but whose last key block of layer 1 states one byte more than
// the codes hold parses, and restoring it is refused naming the layer, the stream, the block and
// the field, with the session untouched.
TEST(SessionFileDamage, ACorruptBlockLengthIsRefusedBeforeTheSessionChanges) {
  TempDir dir;
  const Model model = test::fixture_model("llama", 1);
  const std::string spec = "cachegen:block=16";
  Session saved(model, {spec, 0});
  save_session(saved, saved.eval(test::long_prompt(model, 50)), dir.file("s.vqs"));
  SessionFile f = read_session_file(dir.file("s.vqs"));
  CacheStream& keys = f.layers[1].keys[0];
  ASSERT_EQ(keys.encoded, 48u);
  const Spec parsed = parse_spec(spec);
  const LayerCodecs codecs = parsed.method->make(parsed.params, LayerShape{2, 16, 1, 0});
  ASSERT_TRUE(codecs.key->variable_length());
  const size_t code_bytes = keys.codes.size();
  const size_t last = codecs.key->encoded_bytes(keys.codes.data(), 32, code_bytes);
  uint8_t* length_at = keys.codes.data() + last + 4 * 16 + 4;  // after the grids, mode and reserved bytes
  uint32_t length;
  std::memcpy(&length, length_at, 4);
  ASSERT_EQ(last + 4 * 16 + 8 + length, code_bytes);
  ++length;
  std::memcpy(length_at, &length, 4);

  Session s(model, {spec, 0});
  const std::vector<int32_t> prompt = test::long_prompt(model, 10);
  s.eval(prompt);
  const size_t bytes_before = s.kv_bytes();
  const std::string message = test::error_message<FormatError>([&] { restore_session(s, std::move(f)); });
  EXPECT_CONTAINS(message, fmt::format("layer 1: cachegen:bits=4,block=16,group=32,residual=0: the key stream "
                                       "of KV head 0 has {} code bytes for 48 tokens, whose blocks do not "
                                       "parse: block 2 of 3 (tokens 32..47", code_bytes));
  EXPECT_CONTAINS(message, fmt::format("cachegen: corrupt key codes: field payload length = {}; ", length));
  EXPECT_TRUE(std::ranges::equal(s.tokens(), prompt));
  EXPECT_EQ(s.kv_bytes(), bytes_before);
}

// A child process rewrites the target in a loop with a larger session; the parent kills it as
// soon as a temporary file appears. The target is then one of the two complete files, loads, and
// every leftover is a temporary file beside it, never the target itself.
TEST(SessionFileDamage, AWriterKilledMidwayLeavesThePreviousFileWhole) {
  TempDir dir;
  const std::string target = dir.file("s.vqs");
  const Model& model = test::stories_model();
  Session small(model), large(model);
  save_session(small, small.eval(test::long_prompt(model, 16)), target);
  const std::vector<uint8_t> old_bytes = test::file_bytes(target);
  const std::vector<float> large_logits = large.eval(test::long_prompt(model, 2000), Logits::Last);

  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) save_session(large, large_logits, target);
  }
  bool saw_temp = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!saw_temp && std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : std::filesystem::directory_iterator(dir.path))
      saw_temp |= e.path().filename().string().starts_with("s.vqs.tmp-");
  }
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(saw_temp) << "the writer never created its temporary file";
  EXPECT_TRUE(WIFSIGNALED(status));

  const std::vector<uint8_t> now = test::file_bytes(target);
  EXPECT_NO_THROW(parse_session_file(now));
  if (now != old_bytes) {
    EXPECT_EQ(parse_session_file(now).tokens.size(), 2000u);
  }
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "s.vqs" || name.starts_with("s.vqs.tmp-")) << name;
  }
  Session restored(model);
  EXPECT_NO_THROW(restore_session(restored, read_session_file(target)));
}

}  // namespace
}  // namespace veloxquant
