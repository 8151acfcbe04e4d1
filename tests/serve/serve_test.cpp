// The server's pieces without HTTP: text held back at stop strings and split characters, KV
// pages measured and accounted, sizes parsed, and the scheduler's answers equal a session's own
// greedy continuation while several requests share its steps.
#include "veloxquant/serve.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "expect_error.h"
#include "runtime/model_files.h"
#include "serve/kv_pages.h"
#include "serve/scheduler.h"
#include "serve/text_stream.h"
#include "veloxquant/generate.h"

namespace veloxquant::serve {
namespace {

TEST(TextStream, HoldsBackWhatMayStartAStopString) {
  TextStream s({"END", ""});
  EXPECT_EQ(s.add("one E"), "one ");
  EXPECT_EQ(s.add("N"), "");
  EXPECT_EQ(s.add("x"), "ENx");  // not a stop string after all
  EXPECT_EQ(s.add(" two EN"), " two ");
  EXPECT_EQ(s.add("D three"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.add("more"), "");
  EXPECT_EQ(s.finish(), "");
  EXPECT_EQ(s.text(), "one ENx two ");
}

TEST(TextStream, SendsWholeCharactersOnly) {
  TextStream s({});
  EXPECT_EQ(s.add("caf\xC3"), "caf");
  EXPECT_EQ(s.add("\xA9!"), "\xC3\xA9!");
  EXPECT_EQ(s.add("\xE2\x82"), "");
  EXPECT_EQ(s.finish(), "\xE2\x82");  // the end sends what is left, whole or not
}

const Model& model() {
  static const Model m = Model::load(test::stories_path());
  return m;
}

TEST(KvPages, Fp16BytesPerTokenAreExactAndPagesAddUp) {
  const ModelConfig& c = model().config();
  const KvByteModel fp16 = measure_kv_bytes(model(), "fp16", 512);
  EXPECT_EQ(fp16.per_token, 2.0 * 2 * c.layers * c.kv_heads * c.head_dim);
  EXPECT_EQ(fp16.fixed, 0.0);
  PagePool pool(fp16, 100 * 16 * static_cast<size_t>(fp16.per_token), 16);
  EXPECT_EQ(pool.total(), 100u);
  EXPECT_EQ(pool.pages_for(1), 1u);
  EXPECT_EQ(pool.pages_for(16), 1u);
  EXPECT_EQ(pool.pages_for(17), 2u);
  EXPECT_TRUE(pool.take(60));
  EXPECT_FALSE(pool.take(41));
  EXPECT_EQ(pool.free(), 40u);
  pool.give(60);
  EXPECT_EQ(pool.free(), 100u);
  EXPECT_CONTAINS(test::error_message<Error>([&] { pool.give(1); }), "only 0 are taken");
}

TEST(KvPages, CompressedCachesTakeFewerPagesWithTheirWindowUpFront) {
  const KvByteModel fp16 = measure_kv_bytes(model(), "fp16", 1024);
  const KvByteModel kivi = measure_kv_bytes(model(), "kivi:kbits=2,vbits=2,residual=128", 1024);
  EXPECT_LT(kivi.per_token, fp16.per_token / 3);  // stories260K's heads of 8 pay for their scales
  EXPECT_GT(kivi.fixed, 0.0);                     // the fp16 residual window
  // The line lies above what a cache stores at every length, up to a page's rounding.
  const KvByteModel evict = measure_kv_bytes(model(), "h2o:budget=128", 1024);
  EXPECT_EQ(evict.per_token, 0.0);
  EXPECT_GE(evict.fixed, 128 * fp16.per_token);
}

TEST(Serve, ParseBytes) {
  EXPECT_EQ(parse_bytes("8GiB"), size_t{8} << 30);
  EXPECT_EQ(parse_bytes("512MiB"), size_t{512} << 20);
  EXPECT_EQ(parse_bytes("1.5GB"), size_t{1500000000});
  EXPECT_EQ(parse_bytes("65536"), size_t{65536});
  for (const char* bad : {"", "MiB", "-1GiB", "8 GiB", "8gib", "0", "nan"})
    EXPECT_CONTAINS(test::error_message<Error>([&] { parse_bytes(bad); }),
                    "expected a positive number of bytes");
}

// The gauges once the scheduler is idle again: it publishes them before each step.
Gauges idle_gauges(const Metrics& metrics) {
  for (int i = 0; i < 1000; ++i) {
    const Gauges g = metrics.gauges();
    if (g.running == 0 && g.queued == 0 && g.pages_free == g.pages_total) return g;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return metrics.gauges();
}

std::string collect(RequestHandle& h, RequestHandle::Update& end) {
  std::string text;
  while (!end.finished) {
    if (h.next(end, Clock::now() + std::chrono::seconds(30))) text += end.text;
  }
  return text;
}

TEST(Scheduler, ConcurrentRequestsEachEqualTheirOwnGreedyContinuation) {
  Metrics metrics;
  Scheduler scheduler(
      model(), SchedulerOptions{"kivi:kbits=4,vbits=4,residual=32", 256, size_t{64} << 20, 16, 3, 8, 24},
      metrics);
  const Tokenizer& tok = model().tokenizer();
  const std::vector<std::string> prompts{"Once upon a time", "The cat sat", "Lily went to the park and",
                                         "Tom", "One day, a big"};
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const std::string& p : prompts) {
    GenerationRequest r;
    r.prompt = tok.encode(p, true);
    r.sampling.temperature = 0;
    r.max_tokens = 30;
    handles.push_back(scheduler.submit(r));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    RequestHandle::Update end;
    const std::string text = collect(*handles[i], end);
    Session own(model(), SessionOptions{"kivi:kbits=4,vbits=4,residual=32", 256});
    Sampler greedy(SamplerOptions{.temperature = 0});
    const std::vector<int32_t> prompt = tok.encode(prompts[i], true);
    const std::vector<int32_t> generated = generate(own, greedy, own.eval(prompt), GenerateOptions{30});
    EXPECT_EQ(end.completion_tokens, generated.size()) << prompts[i];
    EXPECT_EQ(text, tok.decode(generated, false)) << prompts[i];
    EXPECT_EQ(end.prompt_tokens, prompt.size());
  }
  const Gauges g = idle_gauges(metrics);
  EXPECT_EQ(g.pages_free, g.pages_total);
  EXPECT_EQ(g.running, 0u);
}

// A SnapKV cache holds a prompt read in chunks whole until its last chunk, then keeps its budget:
// its pages follow, taken while the prompt is held and given back once it selects.
TEST(Scheduler, AnEvictingCacheTakesPagesWhileItHoldsAPromptAndGivesThemBack) {
  Metrics metrics;
  Scheduler scheduler(
      model(), SchedulerOptions{"snapkv:budget=32,window=8", 512, size_t{64} << 20, 16, 1, 1, 64}, metrics);
  GenerationRequest r;
  for (int32_t t = 0; t < 300; ++t) r.prompt.push_back(1 + (t * 37) % 400);
  r.sampling.temperature = 0;
  r.max_tokens = 20;
  const std::shared_ptr<RequestHandle> h = scheduler.submit(r);
  RequestHandle::Update end;
  collect(*h, end);
  EXPECT_EQ(end.completion_tokens, 20u);
  const Gauges g = idle_gauges(metrics);
  const ModelConfig& c = model().config();
  const size_t fp16_token = size_t{2} * 2 * c.layers * c.kv_heads * c.head_dim;
  // Four chunks of 64 held before the fifth ends the prompt: at least 256 tokens' fp16 bytes.
  EXPECT_GE(g.pages_used_peak * g.page_bytes, 256 * fp16_token);
  EXPECT_EQ(g.pages_free, g.pages_total);
}

// Requests of one length in a pool for two of them: two run, the rest wait, and none is preempted
// (each reserves the pages of its generated tokens when admitted, so none outgrows the pool).
TEST(Scheduler, SequencesThatFitAtAdmissionAreNotPreemptedAsTheyGrow) {
  Metrics metrics;
  const KvByteModel fp16 = measure_kv_bytes(model(), "fp16", 128);
  const size_t sequence = static_cast<size_t>(fp16.per_token) * 128;  // 100 prompt + 28 generated
  Scheduler scheduler(model(), SchedulerOptions{"fp16", 256, 2 * sequence + sequence / 2, 16, 8, 8, 64},
                      metrics);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int i = 0; i < 5; ++i) {
    GenerationRequest r;
    for (int32_t t = 0; t < 100; ++t) r.prompt.push_back(1 + (t * 37 + i * 11) % 400);
    r.sampling.temperature = 0;
    r.max_tokens = 28;
    handles.push_back(scheduler.submit(r));
  }
  for (auto& h : handles) {
    RequestHandle::Update end;
    collect(*h, end);
    EXPECT_EQ(end.reason, FinishReason::Length);
  }
  EXPECT_CONTAINS(metrics.prometheus(), "veloxquant_preemptions_total 0\n");
}

TEST(Scheduler, RefusesRequestsThatCouldNeverRunAndAFullQueue) {
  Metrics metrics;
  SchedulerOptions o{"fp16", 64, size_t{1} << 20, 16, 1, 1, 512};
  Scheduler scheduler(model(), o, metrics);
  GenerationRequest r;
  r.prompt = std::vector<int32_t>(64, 5);
  EXPECT_CONTAINS(test::error_message<Error>([&] { scheduler.submit(r); }), "the context holds 64");
  r.prompt = {1, 5};
  r.max_tokens = 0;
  EXPECT_CONTAINS(test::error_message<Error>([&] { scheduler.submit(r); }), "max_tokens 0");
  r.max_tokens = 40;
  r.sampling.top_p = 2;
  EXPECT_CONTAINS(test::error_message<Error>([&] { scheduler.submit(r); }), "top_p");
  r.sampling.top_p = 1;
  EXPECT_CONTAINS(test::error_message<Error>([] {
                    Metrics m;
                    Scheduler tiny(model(), SchedulerOptions{"fp16", 64, 1000, 16, 1, 1, 512}, m);
                  }),
                  "one sequence needs at least");
}

}  // namespace
}  // namespace veloxquant::serve
