// Continuous batching: requests join the running batch between forward steps, prompts are cut
// into chunks that share each step with the running sequences' next tokens, and a request is
// admitted only when its caches' pages fit (PagePool). When a growing sequence finds no free
// page, the most recently admitted other one is preempted: its caches are dropped and it waits
// at the front of the queue to be recomputed from its tokens.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "serve/kv_pages.h"
#include "serve/metrics.h"
#include "veloxquant/model.h"
#include "veloxquant/sampler.h"

namespace veloxquant::serve {

using Clock = std::chrono::steady_clock;

struct SchedulerOptions {
  std::string kv_spec = "fp16";
  size_t context = 0;             // tokens per sequence; 0: the model's
  size_t kv_memory = 1ull << 30;  // bytes of KV pages for all sequences
  size_t page_tokens = 64;
  size_t parallel = 16;      // sequences decoded at once
  size_t queue = 64;         // requests waiting beyond those; more are refused
  size_t step_tokens = 512;  // tokens per forward step: decode tokens first, then prompt chunks
  // Generated tokens whose pages a request takes when it is admitted, beyond its prompt (at most
  // its max_tokens): sequences that grow into pages nobody holds would preempt each other.
  size_t reserve_tokens = 256;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;
  SamplerOptions sampling;
  size_t max_tokens = 16;
  std::vector<std::string> stop;
  Clock::time_point deadline = Clock::time_point::max();
};

enum class FinishReason { Stop, Length, Cancelled, Timeout, Error };
const char* finish_reason_name(FinishReason r);

// A submitted request as its HTTP handler sees it: text as it is generated, then the end.
class RequestHandle {
 public:
  struct Update {
    std::string text;  // new text since the last update
    bool finished = false;
    FinishReason reason = FinishReason::Stop;
    std::string error;  // when reason is Error
    size_t prompt_tokens = 0, completion_tokens = 0;
  };
  // Waits until there is new text or the end, or until `until`; false if nothing came.
  bool next(Update& update, Clock::time_point until);
  // The client is gone: the scheduler drops the sequence and its pages at its next step.
  void cancel();

 private:
  friend class Scheduler;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::string text_;
  bool finished_ = false, cancelled_ = false;
  FinishReason reason_ = FinishReason::Stop;
  std::string error_;
  size_t prompt_tokens_ = 0, completion_tokens_ = 0;
  void push(const std::string& text, size_t completion_tokens);
  void finish(FinishReason reason, const std::string& error = "");
  bool cancelled();
};

// Why submit() refused a request: the queue is full (retry later) or the server is draining.
struct Refused : Error {
  using Error::Error;
  bool draining = false;
};

class Scheduler {
 public:
  // Measures the spec's bytes per token (measure_kv_bytes) and starts the step thread.
  Scheduler(Model model, SchedulerOptions options, Metrics& metrics);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Throws Refused when the queue is full or the server drains, and Error when
  // the request could never run: an empty prompt, a prompt longer than the context, or more pages
  // than the whole pool.
  std::shared_ptr<RequestHandle> submit(GenerationRequest request);
  // Refuses new requests and returns once every running and queued one has finished; those still
  // unfinished at `deadline` are cancelled.
  void drain(Clock::time_point deadline);
  const Model& model() const { return model_; }
  size_t context() const { return context_; }
  const PagePool& pages() const { return pages_; }  // read with the scheduler's counts in Metrics

 private:
  struct Sequence;
  struct Planned {  // a sequence's tokens in the step being composed
    Sequence* sequence;
    size_t tokens;
  };
  void loop();
  void admit();
  void retire_finished();
  // Takes pages until s holds `need`, preempting the newest other sequences (and taking them out
  // of the step, their tokens back into its budget) until they fit; false if s alone cannot.
  bool grow_to(Sequence& s, size_t need, std::vector<Planned>& step, size_t& budget);
  // After a step, s holds what its caches store or its reserved pages, whichever is more: an evicting cache
  // takes pages while it holds a whole prompt and gives them back once it selects. False when s alone cannot
  // have them.
  bool settle(Sequence& s);
  // The pages s keeps at least: its tokens and up to --reserve-tokens of those still to come.
  size_t reserved_pages(const Sequence& s) const;
  void preempt(Sequence& s);
  void after_step(Sequence& s);
  void finish(Sequence& s, FinishReason reason, const std::string& error = "");
  // Called with mutex_ held, from any thread: reads no cache (a step may be running).
  void publish_gauges();

  Model model_;
  SchedulerOptions options_;
  Metrics& metrics_;
  size_t context_;
  PagePool pages_;
  size_t peak_used_ = 0;
  size_t stored_bytes_ = 0;  // the running caches' bytes before the current step (loop thread)
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<std::unique_ptr<Sequence>> queue_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order
  bool stopping_ = false, draining_ = false;
  std::thread thread_;
};

}  // namespace veloxquant::serve
