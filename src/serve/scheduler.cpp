#include "serve/scheduler.h"

#include <algorithm>

#include "serve/text_stream.h"

namespace veloxquant::serve {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Timeout: return "timeout";
    case FinishReason::Error: return "error";
  }
  return "error";
}

bool RequestHandle::next(Update& update, Clock::time_point until) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_until(lock, until, [&] { return !text_.empty() || finished_; })) return false;
  update.text = std::move(text_);
  text_.clear();
  update.finished = finished_;
  update.reason = reason_;
  update.error = error_;
  update.prompt_tokens = prompt_tokens_;
  update.completion_tokens = completion_tokens_;
  return true;
}

void RequestHandle::cancel() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
}

bool RequestHandle::cancelled() {
  std::lock_guard lock(mutex_);
  return cancelled_;
}

void RequestHandle::push(const std::string& text, size_t completion_tokens) {
  {
    std::lock_guard lock(mutex_);
    text_ += text;
    completion_tokens_ = completion_tokens;
  }
  ready_.notify_all();
}

void RequestHandle::finish(FinishReason reason, const std::string& error) {
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
    reason_ = reason;
    error_ = error;
  }
  ready_.notify_all();
}

struct Scheduler::Sequence {
  std::shared_ptr<RequestHandle> handle = std::make_shared<RequestHandle>();
  GenerationRequest request;
  Sampler sampler;
  TextStream text;
  std::unique_ptr<Session> session;  // null while queued
  std::vector<int32_t> tokens;       // the prompt, then what was generated: what a recompute evaluates
  size_t fed = 0;                    // of `tokens`, those the session holds
  size_t generated = 0, pages = 0;
  bool done = false;
  Clock::time_point arrived = Clock::now(), last_token;

  explicit Sequence(GenerationRequest r)
      : request(std::move(r)), sampler(request.sampling), text(request.stop), tokens(request.prompt) {
    for (int32_t t : tokens)
      sampler.accept(t);  // the repetition penalty sees the prompt, as generate's caller does
  }
};

Scheduler::Scheduler(Model model, SchedulerOptions options, Metrics& metrics)
    : model_(std::move(model)),
      options_(std::move(options)),
      metrics_(metrics),
      context_(options_.context ? options_.context : model_.config().context_length),
      pages_(measure_kv_bytes(model_, options_.kv_spec), options_.kv_memory, options_.page_tokens) {
  if (options_.parallel == 0) throw Error("parallel 0; expected at least 1 sequence");
  if (options_.step_tokens == 0) throw Error("step tokens 0; expected at least 1");
  // A sequence must fit alone, with the smallest prompt and one generated token.
  if (pages_.pages_for(2) > pages_.total()) {
    throw Error("kv memory " + std::to_string(options_.kv_memory) + " bytes holds " +
                std::to_string(pages_.total()) + " pages of " + std::to_string(pages_.page_bytes()) +
                " bytes; one sequence needs at least " + std::to_string(pages_.pages_for(2)));
  }
  publish_gauges();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (auto& s : queue_) s->handle->cancel();
    for (auto& s : running_) s->handle->cancel();
  }
  wake_.notify_all();
  thread_.join();
}

std::shared_ptr<RequestHandle> Scheduler::submit(GenerationRequest request) {
  if (request.prompt.empty()) throw Error("the prompt has no tokens; expected at least 1");
  if (request.max_tokens == 0) throw Error("max_tokens 0; expected at least 1");
  if (request.prompt.size() >= context_) {
    throw Error("the prompt has " + std::to_string(request.prompt.size()) + " tokens; the context holds " +
                std::to_string(context_) + " with room for at least one generated token");
  }
  check_sampler_options(request.sampling);
  const size_t most = std::min(context_, request.prompt.size() + request.max_tokens);
  if (pages_.pages_for(most) > pages_.total()) {
    throw Error("the request may grow to " + std::to_string(most) + " tokens, " +
                std::to_string(pages_.pages_for(most)) + " KV pages; the pool holds " +
                std::to_string(pages_.total()) + " (raise --kv-memory or lower max_tokens)");
  }
  auto s = std::make_unique<Sequence>(std::move(request));
  std::shared_ptr<RequestHandle> handle = s->handle;
  {
    std::lock_guard lock(mutex_);
    if (draining_ || stopping_) {
      Refused refused("the server is shutting down; retry on another server");
      refused.draining = true;
      throw refused;
    }
    if (queue_.size() >= options_.queue) {
      throw Refused("the queue holds " + std::to_string(queue_.size()) + " requests, its limit; retry later");
    }
    queue_.push_back(std::move(s));
    publish_gauges();
  }
  wake_.notify_all();
  return handle;
}

void Scheduler::drain(Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  draining_ = true;
  wake_.notify_all();
  const auto empty = [&] { return running_.empty() && queue_.empty(); };
  if (idle_.wait_until(lock, deadline, empty)) return;
  for (auto& s : queue_) s->handle->cancel();
  for (auto& s : running_) s->handle->cancel();
  wake_.notify_all();
  idle_.wait(lock, empty);
}

void Scheduler::finish(Sequence& s, FinishReason reason, const std::string& error) {
  if (reason == FinishReason::Stop || reason == FinishReason::Length) {
    const std::string rest = s.text.finish();
    if (!rest.empty()) s.handle->push(rest, s.generated);
  }
  {
    std::lock_guard lock(s.handle->mutex_);
    s.handle->prompt_tokens_ = s.request.prompt.size();
    s.handle->completion_tokens_ = s.generated;
  }
  s.handle->finish(reason, error);
  pages_.give(s.pages);
  s.pages = 0;
  s.session.reset();
  s.done = true;
  metrics_.count_tokens(s.request.prompt.size(), s.generated);
}

void Scheduler::retire_finished() {
  const Clock::time_point now = Clock::now();
  for (auto* list : {&running_}) {
    for (auto& s : *list) {
      if (s->done) continue;
      if (s->handle->cancelled()) finish(*s, FinishReason::Cancelled);
      else if (now > s->request.deadline) finish(*s, FinishReason::Timeout, "the request passed its timeout");
    }
    std::erase_if(*list, [](const auto& s) { return s->done; });
  }
  for (auto& s : queue_) {
    if (s->handle->cancelled()) finish(*s, FinishReason::Cancelled);
    else if (now > s->request.deadline)
      finish(*s, FinishReason::Timeout, "the request passed its timeout in the queue");
  }
  std::erase_if(queue_, [](const auto& s) { return s->done; });
}

void Scheduler::admit() {
  while (!queue_.empty() && running_.size() < options_.parallel) {
    Sequence& s = *queue_.front();
    const size_t need = reserved_pages(s);
    if (!pages_.take(need)) return;  // first come, first served: later requests wait behind it
    s.pages = need;
    s.fed = 0;
    s.session = std::make_unique<Session>(model_, SessionOptions{options_.kv_spec, context_});
    running_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

void Scheduler::preempt(Sequence& s) {
  pages_.give(s.pages);
  s.pages = 0;
  s.session.reset();
  s.fed = 0;
  metrics_.count_preemption();
  auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& p) { return p.get() == &s; });
  queue_.push_front(std::move(*it));
  running_.erase(it);
}

bool Scheduler::grow_to(Sequence& s, size_t need, std::vector<Planned>& step, size_t& budget) {
  if (need <= s.pages) return true;
  while (!pages_.take(need - s.pages)) {
    // The newest other sequence gives its pages back and waits to be recomputed.
    auto victim = std::find_if(running_.rbegin(), running_.rend(),
                               [&](const auto& p) { return p.get() != &s && !p->done; });
    if (victim == running_.rend()) return false;
    Sequence* v = victim->get();
    auto planned = std::find_if(step.begin(), step.end(), [&](const Planned& p) { return p.sequence == v; });
    if (planned != step.end()) {
      budget += planned->tokens;
      step.erase(planned);
    }
    preempt(*v);
  }
  s.pages = need;
  return true;
}

size_t Scheduler::reserved_pages(const Sequence& s) const {
  const size_t to_come = std::max<size_t>(1, std::min(s.request.max_tokens - s.generated,
                                                      options_.reserve_tokens));
  return pages_.pages_for(std::min(context_, s.tokens.size() + to_come));
}

bool Scheduler::settle(Sequence& s) {
  const size_t page = pages_.page_bytes();
  const size_t stored = (s.session->kv_bytes() + page - 1) / page;
  const size_t want = std::max(stored, reserved_pages(s));
  if (want < s.pages) {
    pages_.give(s.pages - want);
    s.pages = want;
    return true;
  }
  std::vector<Planned> none;
  size_t budget = 0;
  return grow_to(s, want, none, budget);
}

void Scheduler::after_step(Sequence& s) {
  const Tokenizer& tok = model_.tokenizer();
  const int32_t t = s.session->sample(s.sampler);
  const Clock::time_point now = Clock::now();
  const double since =
      std::chrono::duration<double>(now - (s.generated == 0 ? s.arrived : s.last_token)).count();
  if (s.generated == 0) metrics_.observe_first_token(since);
  else metrics_.observe_inter_token(since);
  s.last_token = now;
  if (tok.is_end_of_generation(t)) return finish(s, FinishReason::Stop);
  ++s.generated;
  s.sampler.accept(t);
  s.tokens.push_back(t);
  const std::string text = s.text.add(tok.token_to_piece(t));
  if (!text.empty()) s.handle->push(text, s.generated);
  if (s.text.stopped()) return finish(s, FinishReason::Stop);
  if (s.generated == s.request.max_tokens || s.session->room() == 0) finish(s, FinishReason::Length);
}

void Scheduler::publish_gauges() {
  Gauges g;
  g.running = running_.size();
  g.queued = queue_.size();
  g.pages_total = pages_.total();
  g.pages_free = pages_.free();
  g.pages_used_peak = peak_used_ = std::max(peak_used_, pages_.used());
  g.page_bytes = pages_.page_bytes();
  g.fixed_bytes = pages_.byte_model().fixed;
  g.bytes_per_token = pages_.byte_model().per_token;
  g.kv_bytes_stored = stored_bytes_;
  metrics_.set(g);
}

void Scheduler::loop() {
  std::unique_lock lock(mutex_);
  while (true) {
    retire_finished();
    admit();
    // Only this thread touches the caches, and no step runs now: their bytes are read here.
    stored_bytes_ = 0;
    for (const auto& s : running_)
      if (s->session) stored_bytes_ += s->session->kv_bytes();
    publish_gauges();
    if (running_.empty()) {
      if (queue_.empty()) {
        idle_.notify_all();
        if (stopping_) return;
      }
      wake_.wait_for(lock, std::chrono::milliseconds(50));
      continue;
    }
    // The step: every decoding sequence's next token, then prompt chunks in admission order.
    std::vector<Sequence*> order;
    for (auto& s : running_)
      if (s->tokens.size() - s->fed == 1) order.push_back(s.get());
    for (auto& s : running_)
      if (s->tokens.size() - s->fed > 1) order.push_back(s.get());
    std::vector<Planned> step;
    size_t budget = options_.step_tokens;
    for (Sequence* s : order) {
      if (!s->session || budget == 0) continue;  // preempted while the step was composed
      const size_t n = std::min(budget, s->tokens.size() - s->fed);
      if (!grow_to(*s, pages_.pages_for(s->fed + n + 1), step, budget)) {
        finish(*s, FinishReason::Error, "the KV pages cannot hold this sequence");
        continue;
      }
      step.push_back({s, n});
      budget -= n;
    }
    std::vector<SessionStep> work;
    for (const auto& [s, n] : step) {
      const size_t rest = s->tokens.size() - s->fed - n;
      work.push_back({s->session.get(), std::span(s->tokens).subspan(s->fed, n),
                      rest == 0 ? Logits::Sample : Logits::None, rest});
    }
    lock.unlock();
    std::string failure;
    try {
      eval_sessions(work);
    } catch (const std::exception& e) {
      failure = e.what();
    }
    lock.lock();
    for (const auto& [s, n] : step) {
      if (!s->session) continue;  // preempted for another's pages earlier in this loop
      if (!failure.empty()) {
        finish(*s, FinishReason::Error, failure);
        continue;
      }
      s->fed += n;
      if (!settle(*s)) {
        finish(*s, FinishReason::Error, "the KV memory cannot hold this sequence's caches");
        continue;
      }
      if (s->fed == s->tokens.size()) after_step(*s);
    }
  }
}

}  // namespace veloxquant::serve
