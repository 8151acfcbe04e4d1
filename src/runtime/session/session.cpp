// The forward pass of a decoder over one sequence, or several in lockstep (SessionOptions::batch):
// every projection runs on all of their rows at once, so the weights are read once per step for
// every sequence, and each sequence attends through its own KVCache per layer: it receives
// pre-RoPE keys with their positions and attends for the layer's (rotated) queries, so every
// cache method runs inside the model.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <tuple>

#include "cache/eviction/squeeze_budgets.h"
#include "runtime/model/model_impl.h"
#include "runtime/session/cpu_forward.h"
#include "runtime/session/device_forward.h"
#include "veloxquant/cache.h"
#include "veloxquant/calibration.h"
#include "veloxquant/model.h"
#include "veloxquant/observer.h"
#include "veloxquant/session_file.h"

namespace veloxquant {
namespace {

// Tokens per forward step: bounds the activation buffers of a long prompt (as llama.cpp's
// micro-batch does) while keeping the projections matrix-matrix products.
constexpr size_t kMicroBatch = 512;
// What KVzip's reconstruction pass puts before each chunk of the context it re-reads.
constexpr std::string_view kRepeatInstruction = "\n\nRepeat the previous context exactly.\n";

void check_token_ids(std::span<const int32_t> tokens, size_t vocab) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<size_t>(tokens[i]) >= vocab) {
      throw Error("token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                  " is out of range; expected 0.." + std::to_string(vocab - 1));
    }
  }
}

const char* device_name(Device d) { return d == Device::Cuda ? "cuda" : "cpu"; }

}  // namespace

Device parse_device(std::string_view name) {
  if (name == "cpu") return Device::Cpu;
  if (name == "cuda") return Device::Cuda;
  throw Error("device '" + std::string(name) + "'; expected cpu or cuda");
}

GpuWeights parse_gpu_weights(std::string_view name) {
  if (name == "f16") return GpuWeights::F16;
  if (name == "f32") return GpuWeights::F32;
  throw Error("gpu weights '" + std::string(name) + "'; expected f16 or f32");
}

bool cuda_built() {
#ifdef VELOXQUANT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

struct Session::Impl {
  Model model;
  SessionOptions options;
  size_t context = 0;
  size_t position = 0;
  Spec spec;
  // Device::Cpu: sequence b's layer l at b * cache_layers + l (shared-KV layers have none)
  std::vector<KVCache> caches;
  std::vector<RopeParams> ropes;  // per layer: the model's, a windowed layer's own, or phi3's long factors
  std::unique_ptr<runtime::DeviceForward> gpu;  // Device::Cuda: weights and caches on the GPU
  // A calibrated spec's artifact, read and checked against the model once for every layer.
  std::shared_ptr<const CalibrationArtifact> calibration;
  std::vector<std::vector<int32_t>> history;  // per sequence, the tokens evaluated so far
  // squeeze: per sequence and layer, how similar the hidden state stays across the attention
  // block (mean cosine over the first step's tokens); measured once, then every layer's budget
  // is set.
  std::vector<std::vector<double>> importance;
  bool importance_set = false;
  CacheObserver* observer = nullptr;  // not owned; null: nothing is timed or recorded
  // The last eval was Logits::Sample: its last token's logits are in `kept` (Device::Cpu) or on
  // the GPU, for sample().
  bool logits_kept = false;
  std::vector<float> kept;

  Impl(Model m, SessionOptions o) : model(std::move(m)), options(std::move(o)) {
    const ModelConfig& c = model.config();
    context = options.context ? options.context : c.context_length;
    spec = parse_spec(options.kv_spec);
    const Model::Impl& weights = ModelInternals::of(model);
    for (uint32_t l = 0; l < c.layers; ++l) {
      ropes.push_back(c.layer_rope(l));
      // phi3's 128k models rotate with their long factors once the context passes the original.
      if (weights.rope_long_factors && context > weights.rope_original_context)
        ropes.back().freq_factors = weights.rope_long_factors;
    }
    if (options.batch == 0) throw Error("session batch 0; expected at least 1 sequence");
    history.resize(options.batch);
    if (spec.method->calibrated() && !spec.params.get_text("artifacts").empty()) {
      calibration = load_calibration(spec.params.get_text("artifacts"), spec);
      check_calibration_model(*calibration, model_identity(model));
    }
    if (options.device == Device::Cuda) {
      check_device_supports();
      gpu = runtime::make_device_forward(model, spec, ropes, context, kMicroBatch, options.batch,
                                         options.gpu_weights, calibration);
      return;
    }
    make_caches();
    if (caches.front().scores_by_reconstruction() && options.batch != 1) {
      throw Error("kvzip scores a session's own sequence; this session decodes " +
                  std::to_string(options.batch) + " in lockstep (run it with batch 1)");
    }
  }

  // KVzip: before a prompt, every token of the sequence so far and of the prompt is scored by the
  // most attention the model pays it while re-reading the sequence, chunk by chunk, after an
  // instruction to repeat it. The pass runs on a scratch fp16 session, which is rolled back to the
  // sequence after each chunk (the paper drops each chunk's keys and values the same way), so the
  // scores come from the uncompressed cache whatever quantizer this session stores with.
  void score_by_reconstruction(std::span<const int32_t> prompt) {
    std::vector<int32_t> seq = history.front();
    seq.insert(seq.end(), prompt.begin(), prompt.end());
    const std::vector<int32_t> ask = model.tokenizer().encode(kRepeatInstruction, false);
    const auto chunk = static_cast<size_t>(spec.eviction_params.get_int("chunk"));
    Session scratch(model, SessionOptions{"fp16", seq.size() + ask.size() + std::min(chunk, seq.size())});
    Impl& sc = *scratch.impl_;
    sc.step_all(seq);
    std::vector<std::vector<CacheStream>> keys, values;  // the scratch caches holding just `seq`
    for (const KVCache& cache : sc.caches)
      keys.push_back(cache.key_streams()), values.push_back(cache.value_streams());
    const size_t layers = caches.size();
    std::vector<std::vector<std::vector<float>>> peaks(layers);
    for (size_t l = 0; l < layers; ++l) peaks[l].assign(caches[l].kv_heads(), std::vector<float>(seq.size()));
    for (size_t c0 = 0; c0 < seq.size(); c0 += chunk) {
      std::vector<int32_t> input = ask;
      input.insert(input.end(), seq.begin() + static_cast<std::ptrdiff_t>(c0),
                   seq.begin() + static_cast<std::ptrdiff_t>(std::min(seq.size(), c0 + chunk)));
      for (KVCache& cache : sc.caches) cache.record_attention_peaks(true);
      sc.step_all(input);
      for (size_t l = 0; l < layers; ++l) {
        const std::vector<std::vector<float>>& seen = sc.caches[l].attention_peaks();
        for (size_t h = 0; h < peaks[l].size(); ++h)
          for (size_t t = 0; t < seq.size(); ++t)
            // A sliding-window layer keeps what its window sees: the newest tokens first.
            peaks[l][h][t] = windowed(l) ? static_cast<float>(t) : std::max(peaks[l][h][t], seen[h][t]);
        sc.caches[l].record_attention_peaks(false);
        sc.caches[l].restore(keys[l], values[l]);
      }
      sc.position = seq.size();
      sc.history.front() = seq;
    }
    std::vector<std::vector<size_t>> budgets(layers);
    if (!spec.eviction_params.get_bool("uniform")) budgets = pooled_budgets(peaks);
    for (size_t l = 0; l < layers; ++l)
      caches[l].set_reconstruction_scores(std::move(peaks[l]), std::move(budgets[l]));
  }
  bool windowed(size_t layer) const { return model.config().sliding(static_cast<uint32_t>(layer)); }
  // KVzip's non-uniform budgets: the best budget x heads scores of all heads of the full-attention
  // layers together; each head keeps as many as it holds of them. Sliding-window layers keep the
  // budget each.
  std::vector<std::vector<size_t>> pooled_budgets(
      const std::vector<std::vector<std::vector<float>>>& peaks) const {
    const size_t layers = peaks.size(), budget = caches.front().budget();
    std::vector<std::tuple<float, size_t, size_t>> all;  // (score, layer, head)
    size_t pooled_heads = 0;
    for (size_t l = 0; l < layers; ++l) {
      if (windowed(l)) continue;
      pooled_heads += peaks[l].size();
      for (size_t h = 0; h < peaks[l].size(); ++h)
        for (const float p : peaks[l][h]) all.emplace_back(p, l, h);
    }
    const size_t keep = std::min(all.size(), budget * pooled_heads);
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(),
                      std::greater<>());
    std::vector<std::vector<size_t>> budgets(layers);
    for (size_t l = 0; l < layers; ++l) budgets[l].assign(peaks[l].size(), windowed(l) ? budget : 0);
    for (size_t i = 0; i < keep; ++i) ++budgets[std::get<1>(all[i])][std::get<2>(all[i])];
    return budgets;
  }
  // The tokens of a batch-1 session in micro-batches, no logits.
  void step_all(std::span<const int32_t> tokens) {
    for (size_t b = 0; b < tokens.size(); b += kMicroBatch) {
      const size_t nb = std::min(kMicroBatch, tokens.size() - b);
      step(tokens.data() + b, nb, nb, nullptr);
    }
  }

  // A GPU session's caches as host copies (Session::caches()): the CPU's layer caches holding the
  // device's streams, which KVCache::restore checks against the method's codecs.
  void download_caches() {
    make_caches();
    std::vector<CacheStream> keys, values;
    for (size_t l = 0; l < caches.size(); ++l) {
      gpu->download(l, keys, values);
      caches[l].restore(std::move(keys), std::move(values));
    }
  }

  // What a GPU session cannot do: its caches are not KVCache objects in host memory.
  void require_cpu(const char* what) const {
    if (gpu) {
      throw Error(std::string(what) + " needs the caches in host memory; this session runs on device " +
                  device_name(options.device) + " (run it with device cpu)");
    }
  }
  // What reads or replaces the caches of the one sequence a session file holds.
  void require_one_sequence(const char* what) const {
    if (options.batch != 1) {
      throw Error(std::string(what) + " works on the caches of one sequence; this session decodes " +
                  std::to_string(options.batch) + " in lockstep (run it with batch 1)");
    }
  }

  std::vector<LayerShape> layer_shapes() const {
    std::vector<LayerShape> shapes = veloxquant::cache_shapes(model.config());
    for (size_t l = 0; l < shapes.size(); ++l) {
      shapes[l].calibration = calibration;
      shapes[l].rope = ropes[l];
    }
    return shapes;
  }
  void make_caches() {
    const ModelConfig& c = model.config();
    caches.clear();
    const std::vector<LayerShape> shapes = layer_shapes();
    if (spec.method->cross_layer()) check_cross_layer_shapes(shapes);
    for (size_t b = 0; b < options.batch; ++b)  // each sequence its own caches, layer by layer
      for (KVCache& cache : make_layer_caches(spec, shapes)) caches.push_back(std::move(cache));
    importance.assign(caches.front().wants_layer_importance() ? options.batch : 0,
                      std::vector<double>(c.cache_layers()));
    importance_set = false;
  }
  // A cross-layer method pairs layers that share one head shape.
  void check_cross_layer_shapes(const std::vector<LayerShape>& shapes) const {
    const ModelConfig& c = model.config();
    for (size_t l = 1; l < shapes.size(); ++l) {
      if (shapes[l].kv_heads != shapes[0].kv_heads || shapes[l].head_dim != shapes[0].head_dim) {
        throw Error(
            fmt::format("'{}' pairs layers across the model, and {} model '{}' has layers of different "
                        "shapes: layer {} has {} KV heads of {}, layer 0 {} of {}; expected one shape "
                        "for every layer (use a per-layer method)",
                        spec.to_string(), c.architecture, c.name, l, shapes[l].kv_heads, shapes[l].head_dim,
                        shapes[0].kv_heads, shapes[0].head_dim));
      }
    }
  }
  // What the CUDA runtime does not run: layers of different shapes or without their own caches,
  // and gemma4's value norm and per-layer inputs.
  void check_device_supports() const {
    const ModelConfig& c = model.config();
    if (c.uniform_layers() && !c.value_norm && c.per_layer_embedding == 0) return;
    throw Error(fmt::format(
        "device cuda: {} model '{}' has per-layer head sizes, KV heads or feed-forward "
        "widths, shared-KV layers, value norms or per-layer inputs, which the CUDA runtime "
        "does not run; expected a model with one shape for all {} layers (run it with device cpu)",
        c.architecture, c.name, c.layers));
  }

  // Runs n tokens of each sequence (tokens [batch, n]); writes the logits of tokens
  // [first_logit, n) of each to `logits` ([batch, n - first_logit, vocab]).
  void step(const int32_t* tokens, size_t n, size_t first_logit, float* logits) {
    if (gpu) {
      gpu->step(tokens, n, first_logit, logits);
      position += n;
      for (size_t b = 0; b < history.size(); ++b)
        history[b].insert(history[b].end(), tokens + b * n, tokens + (b + 1) * n);
      return;
    }
    const size_t batch = options.batch;
    std::vector<runtime::ForwardSegment> segments;
    for (size_t b = 0; b < batch; ++b) segments.push_back(segment(b, b * n, n));
    std::vector<size_t> logit_rows;
    for (size_t b = 0; b < batch; ++b)
      for (size_t t = first_logit; t < n; ++t) logit_rows.push_back(b * n + t);
    runtime::cpu_forward(model, ropes, std::span(tokens, batch * n), segments, logit_rows, logits, observer);
    for (size_t b = 0; b < batch; ++b) finish_step(b, std::span(tokens + b * n, n));
  }

  // Sequence b's share of a CPU step: n tokens at rows [first_row, first_row + n).
  runtime::ForwardSegment segment(size_t b, size_t first_row, size_t n) {
    const size_t layers = model.config().cache_layers();
    return {&caches[b * layers], first_row, n, static_cast<int64_t>(position),
            importance.empty() || importance_set ? nullptr : &importance[b]};
  }

  // After sequence b's tokens of a CPU step: squeeze's budgets once measured, the caches' end of
  // step, the history. The last sequence of the step advances the position.
  void finish_step(size_t b, std::span<const int32_t> tokens) {
    const size_t layers = model.config().cache_layers();
    KVCache* own = &caches[b * layers];
    if (!importance.empty() && !importance_set) {
      const std::vector<size_t> budgets = squeeze_budgets(importance[b], own->budget(),
                                                          own->spec().eviction_params.get_float("p"));
      for (size_t l = 0; l < layers; ++l) own[l].set_budget(budgets[l]);
      if (b + 1 == options.batch) importance_set = true;
    }
    for (size_t l = 0; l < layers; ++l) own[l].finish_step();
    history[b].insert(history[b].end(), tokens.begin(), tokens.end());
    if (b + 1 == options.batch) position += tokens.size();
  }
};

Session::Session(Model model, SessionOptions options)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(options))) {}
Session::~Session() = default;
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;

std::vector<float> Session::eval(std::span<const int32_t> tokens, Logits which) {
  if (impl_->options.batch != 1) {
    throw Error("eval on a session of " + std::to_string(impl_->options.batch) +
                " sequences; expected eval_batch with the tokens of every sequence");
  }
  return eval_batch(tokens, which);
}

std::vector<float> Session::eval_batch(std::span<const int32_t> tokens, Logits which) {
  Impl& s = *impl_;
  const size_t vocab = s.model.config().vocab, batch = s.options.batch;
  if (tokens.empty()) throw Error("eval got no tokens; expected at least 1");
  if (tokens.size() % batch != 0) {
    throw Error("eval_batch got " + std::to_string(tokens.size()) + " tokens for " + std::to_string(batch) +
                " sequences; expected the same number for each (a multiple of " + std::to_string(batch) +
                ")");
  }
  check_token_ids(tokens, vocab);
  const size_t n = tokens.size() / batch, used = s.context - room();
  if (n > room()) {
    throw Error("the context holds " + std::to_string(s.context) + " tokens; " + std::to_string(used) +
                " are used and " + std::to_string(n) + " more do not fit");
  }
  const size_t rows = which == Logits::All ? n : which == Logits::Last ? 1 : 0;
  std::vector<float> logits(batch * rows * vocab);
  s.logits_kept = false;
  if (n > 1 && !s.gpu && s.caches.front().scores_by_reconstruction()) s.score_by_reconstruction(tokens);
  std::vector<int32_t> chunk;
  std::vector<float> chunk_logits;
  for (size_t b = 0; b < n; b += kMicroBatch) {
    const size_t nb = std::min(kMicroBatch, n - b);
    chunk.resize(batch * nb);  // the micro-batch's tokens of every sequence, [batch, nb]
    for (size_t q = 0; q < batch; ++q) std::copy_n(&tokens[q * n + b], nb, &chunk[q * nb]);
    // The micro-batches of one prompt are one prompt to the caches (SnapKV selects after the last).
    if (n > kMicroBatch)
      for (KVCache& cache : s.caches) cache.continue_prompt(n - b - nb);
    if (which == Logits::All) {
      chunk_logits.resize(batch * nb * vocab);
      s.step(chunk.data(), nb, 0, chunk_logits.data());
      for (size_t q = 0; q < batch; ++q)
        std::copy_n(&chunk_logits[q * nb * vocab], nb * vocab, &logits[(q * n + b) * vocab]);
    } else if (which == Logits::Last && b + nb == n) {
      s.step(chunk.data(), nb, nb - 1, logits.data());
    } else if (which == Logits::Sample && b + nb == n) {
      // The GPU keeps them in its own memory; the CPU runtime in `kept`.
      if (!s.gpu) s.kept.resize(batch * vocab);
      s.step(chunk.data(), nb, nb - 1, s.gpu ? nullptr : s.kept.data());
      s.logits_kept = true;
    } else {
      s.step(chunk.data(), nb, nb, nullptr);
    }
  }
  return logits;
}

std::vector<std::vector<float>> eval_sessions(std::span<const SessionStep> steps) {
  if (steps.empty()) return {};
  const auto problem = [](size_t i, const std::string& what) {
    return Error("eval_sessions: step " + std::to_string(i) + " " + what);
  };
  Session::Impl* first = nullptr;
  std::vector<int32_t> tokens;
  std::vector<runtime::ForwardSegment> segments;
  std::vector<size_t> logit_rows;
  for (size_t i = 0; i < steps.size(); ++i) {
    const SessionStep& step = steps[i];
    if (!step.session) throw problem(i, "has no session");
    Session::Impl& s = *step.session->impl_;
    if (s.gpu || s.options.batch != 1) {
      throw problem(i, "runs on device " + std::string(device_name(s.options.device)) + " with batch " +
                           std::to_string(s.options.batch) + "; expected device cpu with batch 1");
    }
    if (s.caches.front().scores_by_reconstruction()) {
      throw problem(i, "stores with kvzip, whose reconstruction pass runs in Session::eval; expected a "
                       "policy that scores from the prompt's own attention");
    }
    if (!first) first = &s;
    if (&ModelInternals::of(s.model) != &ModelInternals::of(first->model) || s.context != first->context) {
      throw problem(i, "has another model or context than step 0; expected one model and context for all");
    }
    for (size_t j = 0; j < i; ++j)
      if (steps[j].session == step.session)
        throw problem(i, "repeats the session of step " + std::to_string(j));
    if (step.tokens.empty()) throw problem(i, "has no tokens; expected at least 1");
    if (step.which == Logits::All && step.tokens.size() > 1 && step.prompt_rest > 0) {
      throw problem(i,
                    "asks for every token's logits of a prompt chunk; expected Logits::Last, None or Sample");
    }
    check_token_ids(step.tokens, s.model.config().vocab);
    if (step.tokens.size() > step.session->room()) {
      throw problem(i, "has " + std::to_string(step.tokens.size()) + " tokens and room for " +
                           std::to_string(step.session->room()));
    }
    segments.push_back(s.segment(0, tokens.size(), step.tokens.size()));
    const size_t rows = step.which == Logits::All ? step.tokens.size() : step.which == Logits::None ? 0 : 1;
    for (size_t r = step.tokens.size() - rows; r < step.tokens.size(); ++r)
      logit_rows.push_back(tokens.size() + r);
    tokens.insert(tokens.end(), step.tokens.begin(), step.tokens.end());
  }
  for (const SessionStep& step : steps) {
    Session::Impl& s = *step.session->impl_;
    s.logits_kept = false;
    if (step.prompt_rest > 0)
      for (KVCache& cache : s.caches) cache.continue_prompt(step.prompt_rest);
  }
  const size_t vocab = first->model.config().vocab;
  std::vector<float> logits(logit_rows.size() * vocab);
  runtime::cpu_forward(first->model, first->ropes, tokens, segments, logit_rows, logits.data());
  std::vector<std::vector<float>> out(steps.size());
  size_t row = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const SessionStep& step = steps[i];
    Session::Impl& s = *step.session->impl_;
    s.finish_step(0, step.tokens);
    const size_t rows = step.which == Logits::All ? step.tokens.size() : step.which == Logits::None ? 0 : 1;
    const auto begin = logits.begin() + static_cast<std::ptrdiff_t>(row * vocab);
    const auto end = begin + static_cast<std::ptrdiff_t>(rows * vocab);
    if (step.which == Logits::Sample) {
      s.kept.assign(begin, end);
      s.logits_kept = true;
    } else {
      out[i].assign(begin, end);
    }
    row += rows;
  }
  return out;
}

int32_t Session::sample(Sampler& sampler) { return sample_batch(std::span(&sampler, 1)).front(); }

std::vector<int32_t> Session::sample_batch(std::span<Sampler> samplers) {
  Impl& s = *impl_;
  if (samplers.size() != s.options.batch) {
    throw Error("sample got " + std::to_string(samplers.size()) + " samplers for " +
                std::to_string(s.options.batch) + " sequences; expected one per sequence");
  }
  if (!s.logits_kept)
    throw Error("sample: the last eval kept no logits; expected eval with Logits::Sample first");
  if (!s.gpu) {
    const size_t vocab = s.model.config().vocab;
    std::vector<int32_t> picked;
    for (size_t b = 0; b < samplers.size(); ++b)
      picked.push_back(samplers[b].sample(std::span(s.kept).subspan(b * vocab, vocab)));
    return picked;
  }
  std::vector<SampleRequest> requests;
  for (Sampler& sampler : samplers) requests.push_back(sampler.request());
  return s.gpu->sample(requests);
}

size_t Session::position() const { return impl_->position; }

size_t Session::room() const {
  const Impl& s = *impl_;
  size_t used = s.position;
  if (s.gpu) {
    used = s.gpu->held_tokens();  // an evicting GPU cache, too, goes on past the context
  } else if (s.caches.front().evicts()) {
    used = 0;
    for (const KVCache& cache : s.caches)
      for (size_t h = 0; h < cache.kv_heads(); ++h) used = std::max(used, cache.stored_tokens(h));
  }
  return s.context > used ? s.context - used : 0;
}
size_t Session::context() const { return impl_->context; }
const Model& Session::model() const { return impl_->model; }

const Spec& Session::spec() const { return impl_->spec; }
Device Session::device() const { return impl_->options.device; }

size_t Session::key_bytes() const {
  if (impl_->gpu) return impl_->gpu->key_bytes();
  size_t b = 0;
  for (const KVCache& c : impl_->caches) b += c.key_bytes();
  return b;
}

size_t Session::value_bytes() const {
  if (impl_->gpu) return impl_->gpu->value_bytes();
  size_t b = 0;
  for (const KVCache& c : impl_->caches) b += c.value_bytes();
  return b;
}

size_t Session::kv_bytes() const { return key_bytes() + value_bytes(); }

size_t Session::kv_held_bytes() const {
  size_t b = 0;
  for (const KVCache& c : impl_->caches) b += c.held_bytes();
  return b;
}

size_t Session::kv_peak_held_bytes() const {
  size_t b = 0;
  for (const KVCache& c : impl_->caches) b += c.peak_held_bytes();
  return b;
}

size_t Session::device_weight_bytes() const { return impl_->gpu ? impl_->gpu->weight_bytes() : 0; }

size_t Session::kv_fp16_bytes() const {
  const Impl& s = *impl_;
  if (s.gpu) {
    const ModelConfig& c = s.model.config();
    size_t row = 0;  // one token's keys of every cache layer
    for (uint32_t l = 0; l < c.cache_layers(); ++l) row += size_t{c.kv_heads_of(l)} * c.head_dim_of(l);
    return size_t{2} * 2 * s.position * s.options.batch * row;
  }
  size_t b = 0;
  for (const KVCache& c : s.caches) b += c.fp16_bytes();
  return b;
}

void Session::reset() {
  Impl& s = *impl_;
  if (s.gpu) s.gpu->reset();
  else s.make_caches();
  s.position = 0;
  s.logits_kept = false;
  for (auto& h : s.history) h.clear();
  if (s.observer) s.observer->reset();
}

void Session::set_observer(CacheObserver* observer) {
  if (observer) impl_->require_cpu("set_observer");
  if (observer) impl_->require_one_sequence("set_observer");
  const ModelConfig& c = impl_->model.config();
  if (observer && (!c.sliding_layers.empty() || c.attention_softcap != 0.0f || c.attention_scale != 0.0f ||
                   c.attention_temperature_scale != 0.0f)) {
    // Its exact reference is plain softmax attention over every token with the model's one RoPE.
    throw Error("set_observer: " + c.architecture +
                " attends with sliding windows, soft-capping or its own query "
                "scale, which the observer's exact attention does not model; expected a model without them");
  }
  if (observer && impl_->position > 0) {
    throw Error("set_observer on a session holding " + std::to_string(impl_->position) +
                " tokens; expected an empty session (the observer compares against every token)");
  }
  impl_->observer = observer;
}

std::span<const int32_t> Session::tokens(size_t sequence) const {
  if (sequence >= impl_->history.size()) {
    throw Error("tokens of sequence " + std::to_string(sequence) + "; the session decodes " +
                std::to_string(impl_->history.size()) + " (0.." + std::to_string(impl_->history.size() - 1) +
                ")");
  }
  return impl_->history[sequence];
}
size_t Session::batch() const { return impl_->options.batch; }
std::span<const KVCache> Session::caches() const {
  impl_->require_one_sequence("caches()");
  if (impl_->gpu) impl_->download_caches();
  return impl_->caches;
}

std::vector<LayerShape> Session::cache_shapes() const { return impl_->layer_shapes(); }

void Session::restore(std::vector<int32_t> tokens, std::vector<KVCache> caches) {
  Impl& s = *impl_;
  s.require_one_sequence("restore");
  if (s.gpu) s.make_caches();  // the layers' shapes to check against
  const ModelConfig& c = s.model.config();
  const Spec& spec = s.spec;
  if (caches.size() != c.cache_layers()) {
    throw Error(fmt::format("restore got {} caches; expected one per layer that stores keys and values ({})",
                            caches.size(), c.cache_layers()));
  }
  for (size_t l = 0; l < caches.size(); ++l) {
    const KVCache& cache = caches[l];
    const LayerShape &got = cache.shape(), &want = s.caches[l].shape();
    if (!(cache.spec() == spec) || got.kv_heads != want.kv_heads || got.head_dim != want.head_dim ||
        got.layer != want.layer || got.seed != want.seed) {
      throw Error(fmt::format("restore: cache {} is '{}' for layer {} ({} KV heads x {}, seed {}); "
                              "expected '{}' for layer {} ({} x {}, seed {})",
                              l, cache.spec().to_string(), got.layer, got.kv_heads, got.head_dim, got.seed,
                              spec.to_string(), want.layer, want.kv_heads, want.head_dim, want.seed));
    }
    if (cache.tokens() != tokens.size()) {
      throw Error(fmt::format("restore: layer {}'s cache holds {} tokens; expected {}, one per "
                              "token of the history",
                              l, cache.tokens(), tokens.size()));
    }
  }
  if (tokens.size() > s.context) {
    throw Error(fmt::format("restore got {} tokens; the context holds {}", tokens.size(), s.context));
  }
  check_token_ids(tokens, c.vocab);
  if (s.gpu) {
    try {
      s.gpu->restore(tokens.size(), caches);
    } catch (...) {
      reset();  // the device caches are empty now: so is the session
      throw;
    }
    s.caches.clear();
  } else {
    s.caches = std::move(caches);
  }
  s.history[0] = std::move(tokens);
  s.position = s.history[0].size();
  s.logits_kept = false;
}

}  // namespace veloxquant
