// GPU sessions save and restore the CPU's session files: a GPU cache holds its CPU codec's bytes,
// so a file saved on either device restores on the other, and decoding goes on from it. Runs on
// the GPU machine with the parity suite (a random-weight fixture built in memory, f32 weights on
// the GPU so that the two forwards differ only by rounding).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "../runtime/fixture_inputs.h"
#include "dev/fixture_model.h"
#include "veloxquant/calibrate.h"
#include "veloxquant/error.h"
#include "veloxquant/model.h"
#include "veloxquant/session_file.h"
#include "veloxquant/spec.h"

namespace veloxquant {
namespace {

constexpr size_t kContext = 1024;

const Model& model() {
  // Two KV heads of 64 with four query heads each; 300-token prompts cross KIVI's and QJL's key
  // groups and residual windows.
  static const Model m = test::model_of(dev::make_fixture(
      {.seed = 7,
       .shape = {.width = 256, .heads = 8, .kv_heads = 2, .head_dim = 64, .ffn = 256, .context = 1024}}));
  return m;
}

Session session(const std::string& spec, Device device) {
  return Session(model(), SessionOptions{spec, kContext, device, GpuWeights::F32});
}

std::vector<int32_t> prompt(size_t n) {
  std::vector<int32_t> t;
  for (size_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 7 + 3) % model().config().vocab));
  return t;
}

// max |a - b| / max |b|, as bench/cuda/gpu_logits.py measures the GPU runtime against the CPU's.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

class GpuSessionFiles : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("vq_gpu_session_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  // A file saved on either device restores on the other, and decoding goes on from it.
  void check_files_move(const std::string& spec) const;

 private:
  std::filesystem::path dir_;
};

class GpuSession : public GpuSessionFiles, public testing::WithParamInterface<const char*> {};

void GpuSessionFiles::check_files_move(const std::string& spec) const {
  const std::vector<int32_t> next{42};
  const std::vector<int32_t> tokens = prompt(300);

  Session gpu = session(spec, Device::Cuda);
  save_session(gpu, gpu.eval(tokens, Logits::Last), path("gpu.vqs"));
  const size_t saved_bytes = gpu.kv_bytes();
  const std::vector<float> gpu_next = gpu.eval(next, Logits::Last);

  // Restored on the GPU, the same bytes give the same logits, bit for bit.
  Session gpu_again = session(spec, Device::Cuda);
  restore_session(gpu_again, read_session_file(path("gpu.vqs")));
  EXPECT_EQ(gpu_again.position(), tokens.size());
  EXPECT_EQ(gpu_again.kv_bytes(), saved_bytes);
  EXPECT_EQ(gpu_again.eval(next, Logits::Last), gpu_next);

  // Restored on the CPU (whose codecs check every stream), it decodes as the GPU does.
  Session cpu = session(spec, Device::Cpu);
  restore_session(cpu, read_session_file(path("gpu.vqs")));
  EXPECT_LE(relative_error(gpu_next, cpu.eval(next, Logits::Last)), 2e-3);

  // A CPU session's file restores on the GPU, which decodes as the CPU does.
  Session cpu_own = session(spec, Device::Cpu);
  save_session(cpu_own, cpu_own.eval(tokens, Logits::Last), path("cpu.vqs"));
  Session gpu_from_cpu = session(spec, Device::Cuda);
  restore_session(gpu_from_cpu, read_session_file(path("cpu.vqs")));
  EXPECT_EQ(gpu_from_cpu.kv_bytes(), cpu_own.kv_bytes());
  EXPECT_LE(relative_error(gpu_from_cpu.eval(next, Logits::Last), cpu_own.eval(next, Logits::Last)), 2e-3);
}

TEST_P(GpuSession, FilesMoveBetweenDevicesAndDecodingGoesOn) { check_files_move(GetParam()); }

// vecinfer's CPU streams carry their KV head's calibrated tables as fitted state; the GPU keeps
// them from the artifact, and a download gets them back from the spec.
TEST_F(GpuSessionFiles, VecinferFilesCarryTheArtifactsTables) {
  const CalibrationArtifact artifact = calibrate(model(), prompt(1024), parse_spec("vecinfer"),
                                                 CalibrateOptions{.context = 512, .max_tokens = 1024});
  save_calibration(artifact, path("cal"));
  check_files_move("vecinfer:artifacts=" + path("cal"));
}

// kvquant_nuq's streams keep their first token as fitted state, on the GPU as on the CPU: the
// files carry it both ways, and the keys, stored before RoPE, are turned to their positions when read.
TEST_F(GpuSessionFiles, KvquantFilesCarryEachStreamsFirstToken) {
  const CalibrationArtifact artifact = calibrate(model(), prompt(1024), parse_spec("kvquant_nuq"),
                                                 CalibrateOptions{.context = 512, .max_tokens = 1024});
  save_calibration(artifact, path("cal"));
  check_files_move("kvquant_nuq:artifacts=" + path("cal"));
}

INSTANTIATE_TEST_SUITE_P(Methods, GpuSession,
                         testing::Values("fp16", "kivi:kbits=2,vbits=2,residual=64", "kivi:kbits=4,vbits=4",
                                         "turboquant_mse:bits=4,vbits=4", "turboquant_prod:bits=3,vbits=3",
                                         "turboquant_rvq", "qjl:vbits=4", "ratequant:bits=4/2+kivi", "kitty"),
                         [](const testing::TestParamInfo<const char*>& i) {
                           std::string name = i.param;
                           for (char& c : name)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return name;
                         });

// streaming_llm on the GPU decodes past the session's context in the memory of its budget, as the
// CPU session does: the same tokens give the same logits and the same cache bytes at every step.
TEST(GpuStreaming, DecodesPastTheContextAsTheCpu) {
  constexpr size_t kShortContext = 256, kPrompt = 200, kSteps = 400;
  const std::vector<int32_t> tokens = prompt(kPrompt + kSteps);
  for (const char* spec :
       {"streaming_llm:budget=100", "streaming_llm:budget=200,sinks=4+kivi:kbits=4,vbits=4,residual=64"}) {
    Session gpu(model(), SessionOptions{spec, kShortContext, Device::Cuda, GpuWeights::F32});
    Session cpu(model(), SessionOptions{spec, kShortContext, Device::Cpu, GpuWeights::F32});
    const std::span<const int32_t> first(tokens.data(), kPrompt);
    double worst = relative_error(gpu.eval(first, Logits::Last), cpu.eval(first, Logits::Last));
    for (size_t i = kPrompt; i < tokens.size(); ++i) {
      const std::span<const int32_t> next(tokens.data() + i, 1);
      worst = std::max(worst, relative_error(gpu.eval(next, Logits::Last), cpu.eval(next, Logits::Last)));
      ASSERT_EQ(gpu.kv_bytes(), cpu.kv_bytes()) << spec << " at position " << i;
      ASSERT_EQ(gpu.room(), cpu.room()) << spec << " at position " << i;
    }
    EXPECT_EQ(gpu.position(), kPrompt + kSteps);
    EXPECT_LE(worst, 2e-3) << spec;
    std::printf("| %s | context %zu, position %zu | kv bytes %zu | logits err %.2e |\n", spec, kShortContext,
                gpu.position(), gpu.kv_bytes(), worst);
  }
}

TEST(GpuSessionRefusals, AnotherSpecsFileLeavesTheSessionAsItWas) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("vq_gpu_refusal_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  Session cpu = session("kivi:kbits=4,vbits=4", Device::Cpu);
  save_session(cpu, cpu.eval(prompt(100), Logits::Last), dir + "/kivi.vqs");
  Session gpu = session("fp16", Device::Cuda);
  gpu.eval(prompt(40), Logits::Last);
  try {
    restore_session(gpu, read_session_file(dir + "/kivi.vqs"));
    ADD_FAILURE() << "a kivi file restored into an fp16 session";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("saved with another kv spec"), std::string::npos) << e.what();
  }
  EXPECT_EQ(gpu.position(), 40u);
  Session again = session("fp16", Device::Cuda);
  again.eval(prompt(40), Logits::Last);
  const std::vector<int32_t> next{7};
  EXPECT_EQ(gpu.eval(next, Logits::Last), again.eval(next, Logits::Last));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace veloxquant
