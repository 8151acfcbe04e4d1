// What the session-file tests share: models (stories260K and random-weight fixtures built in
// memory), greedy decoding, file bytes and a temporary directory per test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "dev/fixture_model.h"
#include "fixture_inputs.h"
#include "model_files.h"
#include "veloxquant/model.h"
#include "veloxquant/session_file.h"

namespace veloxquant::test {

inline const Model& stories_model() {
  static const Model m = Model::load(stories_path());
  return m;
}

inline Model fixture_model(const std::string& arch, uint64_t seed) {
  return model_of(dev::make_fixture({.arch = arch, .seed = seed}));
}

inline int32_t argmax(const std::vector<float>& x) {
  return static_cast<int32_t>(std::max_element(x.begin(), x.end()) - x.begin());
}

// n greedy tokens after `logits` (what eval returned for the session's last token).
inline std::vector<int32_t> greedy(Session& s, std::vector<float> logits, size_t n) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(argmax(logits));
    logits = s.eval(std::span(&out.back(), 1));
  }
  return out;
}

// A prompt of about `n` tokens for the model (ids cycling through its vocabulary after BOS), so
// that the fixtures, whose vocabularies are tiny, get long prompts too.
inline std::vector<int32_t> long_prompt(const Model& m, size_t n) {
  std::vector<int32_t> t{std::max(m.tokenizer().bos(), 0)};
  for (size_t i = 1; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7 + 3) % m.config().vocab));
  return t;
}

// stories260K's 200-token prompt: a short story repeated, cut to 200 tokens.
inline std::vector<int32_t> stories_prompt() {
  std::string text;
  for (int i = 0; i < 6; ++i) {
    text += "Once upon a time, there was a little girl named Lily. She loved to play outside in "
            "the park with her dog Max. One day, Lily and Max saw a big red ball under a tree. ";
  }
  std::vector<int32_t> t = stories_model().tokenizer().encode(text, true);
  t.resize(200);
  return t;
}

inline std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()),
                                              static_cast<std::streamsize>(b.size()));
}

// A fresh directory under the test temp dir, removed with the object.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("vq_session_") + info->test_suite_name() + "_" + info->name() +
                       "_" + std::to_string(::getpid());
    std::replace(name.begin(), name.end(), '/', '_');
    path = std::filesystem::path(::testing::TempDir()) / name;
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace veloxquant::test
