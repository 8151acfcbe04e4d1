// veloxquant.Model: a GGUF model run with any KV-cache method: generate, perplexity, eval, logits.
// The options mirror `veloxquant generate` and `veloxquant perplexity`; both go through the same
// library functions (generate.h, perplexity.h), so equal inputs give equal numbers.
#include <fmt/format.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>

#include "arrays.h"
#include "bindings.h"
#include "veloxquant/calibrate.h"
#include "veloxquant/error.h"
#include "veloxquant/eval.h"
#include "veloxquant/generate.h"
#include "veloxquant/model.h"
#include "veloxquant/perplexity.h"

namespace nb = nanobind;

namespace veloxquant::python {
namespace {

struct Generation {
  std::string text;  // the generated tokens' pieces, concatenated (may end mid-character)
  std::vector<int32_t> tokens;
  size_t prompt_tokens = 0;
  size_t reused_tokens = 0;  // of the prompt's, restored from load_session
  std::string kv;
  uint64_t seed = 0;
  size_t kv_bytes = 0, kv_fp16_bytes = 0;
};

// Model text may be any bytes (a sampled byte-level token can split a character): invalid UTF-8
// becomes U+FFFD, as the CLI's JSON output does, instead of failing the call.
nb::str utf8_text(const std::string& s) {
  return nb::steal<nb::str>(PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace"));
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot read the text file '{}'", path.string()));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Model.calibrate: calibrate_into() without the GIL, then what it wrote as a dict.
nb::dict calibrate_text(const Model& model, const std::string& text, const std::string& kv,
                        const std::string& out, size_t context, size_t max_tokens) {
  const Spec spec = parse_spec(kv);
  std::optional<SavedCalibration> saved;
  {
    nb::gil_scoped_release unlocked;
    saved = calibrate_into(model, text, spec, out, CalibrateOptions{context, max_tokens});
  }
  nb::dict d;
  d["spec"] = saved->spec;
  d["path"] = saved->path;
  d["tokens"] = saved->artifact.tokens;
  d["layers"] = saved->artifact.layers.size();
  d["kv_heads"] = saved->artifact.kv_heads;
  d["head_dim"] = saved->artifact.head_dim;
  return d;
}

Generation generate_text(const Model& model, const std::string& prompt, size_t n, SamplerOptions sampling,
                         std::optional<uint64_t> seed, const std::optional<std::string>& kv, size_t context,
                         bool ignore_eos, const std::string& load_session, const std::string& save_session) {
  sampling.seed = seed ? *seed : std::random_device{}();
  Sampler sampler(sampling);
  PromptSession p = open_prompt(model, prompt, PromptOptions{kv, context, load_session});
  for (int32_t t : p.prompt) sampler.accept(t);
  evaluate_prompt(p, save_session);
  Generation g;
  g.tokens = generate(p.session, sampler, std::move(p.logits), GenerateOptions{n, ignore_eos});
  g.text = model.tokenizer().decode(g.tokens, /*strip_leading_space=*/false);
  g.prompt_tokens = p.prompt.size();
  g.reused_tokens = p.reused;
  g.kv = p.session.spec().to_string();
  g.seed = sampling.seed;
  g.kv_bytes = p.session.kv_bytes();
  g.kv_fp16_bytes = p.session.kv_fp16_bytes();
  return g;
}

PerplexityResult perplexity_of(const Model& model, const std::string& text, size_t context, size_t chunks,
                               const std::string& kv, const std::string& save_kl_base,
                               const std::string& kl_base) {
  PerplexityOptions options;
  options.context = context;
  options.chunks = chunks;
  options.kv_spec = kv;
  options.save_base = save_kl_base;
  options.kl_base = kl_base;
  nb::gil_scoped_release unlocked;
  return compute_perplexity(model, text, options);
}

}  // namespace

void bind_model(nb::module_& m) {
  nb::class_<Generation>(m, "Generation", "What Model.generate returns.")
      .def_prop_ro(
          "text", [](const Generation& g) { return utf8_text(g.text); },
          "the generated text (invalid UTF-8 replaced by U+FFFD)")
      .def_ro("tokens", &Generation::tokens, "the generated token ids")
      .def_ro("prompt_tokens", &Generation::prompt_tokens, "tokens of the prompt, BOS included")
      .def_ro("reused_tokens", &Generation::reused_tokens,
              "of the prompt's tokens, those restored from load_session (not evaluated)")
      .def_ro("kv", &Generation::kv, "the cache's canonical spec")
      .def_ro("seed", &Generation::seed, "the sampling seed (drawn at random when none was given)")
      .def_ro("kv_bytes", &Generation::kv_bytes, "exact bytes all layers' caches store at the end")
      .def_ro("kv_fp16_bytes", &Generation::kv_fp16_bytes, "what fp16 caches would store");

  nb::class_<PerplexityResult>(m, "PerplexityResult", "What Model.perplexity returns.")
      .def_ro("perplexity", &PerplexityResult::perplexity)
      .def_ro("perplexity_error", &PerplexityResult::perplexity_error,
              "one standard error, from the per-token NLL spread")
      .def_ro("mean_nll", &PerplexityResult::mean_nll)
      .def_ro("chunks", &PerplexityResult::chunks)
      .def_ro("context", &PerplexityResult::context)
      .def_ro("text_tokens", &PerplexityResult::text_tokens)
      .def_ro("scored_tokens", &PerplexityResult::scored_tokens)
      .def_ro("seconds", &PerplexityResult::seconds)
      .def_ro("tokens_per_second", &PerplexityResult::tokens_per_second)
      .def_ro("kv_bytes", &PerplexityResult::kv_bytes, "exact cache bytes after one full chunk")
      .def_ro("kv_fp16_bytes", &PerplexityResult::kv_fp16_bytes)
      .def_ro("compared", &PerplexityResult::compared, "whether kl_base was given")
      .def_ro("kl_mean", &PerplexityResult::kl_mean, "mean KL(base || this) per scored token, nats")
      .def_ro("kl_error", &PerplexityResult::kl_error)
      .def_ro("top1_agreement", &PerplexityResult::top1_agreement);

  const SamplerOptions defaults;
  nb::class_<Model>(m, "Model",
                    "A Llama-family GGUF model (llama, mistral, qwen2; float, legacy, K-quant and IQ4 "
                    "weights, memory-mapped) whose attention runs through a KV-cache method.")
      .def(
          "__init__",
          [](Model* self, const std::filesystem::path& path) {
            new (self) Model(Model::load(path.string()));
          },
          nb::arg("path"), "Loads a GGUF file; raises Error naming the problem when it cannot.")
      .def_prop_ro("architecture", [](const Model& model) { return model.config().architecture; })
      .def_prop_ro("name", [](const Model& model) { return model.config().name; })
      .def_prop_ro("layers", [](const Model& model) { return model.config().layers; })
      .def_prop_ro("heads", [](const Model& model) { return model.config().heads; })
      .def_prop_ro("kv_heads", [](const Model& model) { return model.config().kv_heads; })
      .def_prop_ro("head_dim", [](const Model& model) { return model.config().head_dim; })
      .def_prop_ro("vocab", [](const Model& model) { return model.config().vocab; })
      .def_prop_ro(
          "context_length", [](const Model& model) { return model.config().context_length; },
          "the context the model was trained for")
      .def_prop_ro("parameter_count", &Model::parameter_count)
      .def(
          "tokenize",
          [](const Model& model, const std::string& text, bool add_special) {
            return model.tokenizer().encode(text, add_special);
          },
          nb::arg("text"), nb::arg("add_special") = true,
          "Token ids of text; add_special adds BOS (and EOS) as the vocabulary asks.")
      .def(
          "detokenize",
          [](const Model& model, const std::vector<int32_t>& tokens) {
            return utf8_text(model.tokenizer().decode(tokens));
          },
          nb::arg("tokens"), "The text of token ids (invalid UTF-8 replaced by U+FFFD).")
      .def(
          "logits",
          [](const Model& model, const std::vector<int32_t>& tokens, const std::string& kv, size_t context) {
            std::vector<float> logits;
            {
              nb::gil_scoped_release unlocked;
              Session session(model, SessionOptions{kv, context});
              logits = session.eval(tokens, Logits::All);
            }
            const size_t vocab = model.config().vocab;
            return float_array(std::move(logits), {tokens.size(), vocab});
          },
          nb::arg("tokens"), nb::kw_only(), nb::arg("kv") = "fp16", nb::arg("ctx") = 0,
          "Logits [len(tokens), vocab] float32 of one forward pass over tokens (as one batch) "
          "through a fresh cache of spec kv; ctx: context in tokens (0: the model's).")
      .def(
          "generate",
          [](const Model& model, const std::string& prompt, size_t n, float temp, int top_k, float top_p,
             float repeat_penalty, size_t repeat_last_n, std::optional<uint64_t> seed,
             const std::optional<std::string>& kv, size_t context, bool ignore_eos,
             const std::string& load_session, const std::string& save_session) {
            nb::gil_scoped_release unlocked;
            return generate_text(model, prompt, n,
                                 SamplerOptions{temp, top_k, top_p, repeat_penalty, repeat_last_n, 0}, seed,
                                 kv, context, ignore_eos, load_session, save_session);
          },
          nb::arg("prompt"), nb::arg("n") = 128, nb::kw_only(), nb::arg("temp") = defaults.temperature,
          nb::arg("top_k") = defaults.top_k, nb::arg("top_p") = defaults.top_p,
          nb::arg("repeat_penalty") = defaults.repeat_penalty,
          nb::arg("repeat_last_n") = defaults.repeat_last_n, nb::arg("seed") = nb::none(),
          nb::arg("kv") = nb::none(), nb::arg("ctx") = 0, nb::arg("ignore_eos") = false,
          nb::arg("load_session") = "", nb::arg("save_session") = "",
          "Continues prompt (BOS added) by at most n tokens, as `veloxquant generate` does: "
          "temp (0: greedy), top_k (0: all), top_p, repeat_penalty (1: off) and repeat_last_n "
          "choose tokens; seed (None: random, reported); kv: the KV-cache spec (None: the "
          "loaded session's, else fp16); ctx: context in tokens (0: the model's); ignore_eos: "
          "keep going past end-of-text tokens. load_session: a session file to restore first; "
          "the prompt must start with its tokens and only the rest is evaluated (an empty prompt "
          "continues it as saved). save_session: where to save the session once the prompt is "
          "evaluated (before generating).")
      .def(
          "eval",
          [](const Model& model, const std::string& text, const std::vector<std::string>& kv, size_t context,
             size_t chunks, const std::vector<size_t>& retrieval, const std::vector<double>& depths,
             size_t needle, size_t trials, uint64_t seed, size_t decode_tokens, bool observe,
             std::optional<double> recommend, double max_kl, double recall_tolerance, bool progress) {
            EvalOptions o;
            o.kv = kv;
            o.context = context;
            o.chunks = chunks;
            o.retrieval = retrieval;
            o.depths = depths;
            o.needle_tokens = needle;
            o.trials = trials;
            o.seed = seed;
            o.decode_tokens = decode_tokens;
            o.observe = observe;
            std::optional<Guardrail> guardrail;
            if (recommend) guardrail = Guardrail{*recommend, max_kl, recall_tolerance};
            std::string json;
            {
              nb::gil_scoped_release unlocked;
              json = evaluate_methods_json(model, text, o, guardrail, [progress](const std::string& line) {
                if (progress) std::fprintf(stderr, "%s\n", line.c_str());
              });
            }
            return nb::module_::import_("json").attr("loads")(json);
          },
          nb::arg("text"), nb::kw_only(), nb::arg("kv") = std::vector<std::string>{"all"}, nb::arg("ctx") = 0,
          nb::arg("chunks") = 8, nb::arg("retrieval") = std::vector<size_t>{},
          nb::arg("depths") = std::vector<double>{0.1, 0.5, 0.9}, nb::arg("needle") = 32,
          nb::arg("trials") = 2, nb::arg("seed") = 1, nb::arg("decode_tokens") = 64,
          nb::arg("observe") = false, nb::arg("recommend") = nb::none(), nb::arg("max_kl") = 0.05,
          nb::arg("recall_tolerance") = 0.02, nb::arg("progress") = false,
          "What `veloxquant eval` measures, as the dict it writes to results.json: for fp16 and each "
          "spec of kv (['all']: every registered method), exact key and value bytes, perplexity of "
          "text with KL and top-1 agreement against fp16, needle retrieval at the retrieval lengths "
          "(default ctx/2 and ctx) and depths, prefill and decode speed, peak memory, and with "
          "observe=True per layer and KV head observations. recommend=MAXDELTA adds the smallest "
          "cache within MAXDELTA percent perplexity, max_kl and recall_tolerance of fp16. "
          "progress=True prints a line per stage to stderr.")
      .def(
          "perplexity",
          [](const Model& model, const std::string& text, size_t context, size_t chunks,
             const std::string& kv, const std::string& save_kl_base, const std::string& kl_base) {
            return perplexity_of(model, text, context, chunks, kv, save_kl_base, kl_base);
          },
          nb::arg("text"), nb::kw_only(), nb::arg("ctx") = 512, nb::arg("chunks") = 0, nb::arg("kv") = "fp16",
          nb::arg("save_kl_base") = "", nb::arg("kl_base") = "",
          "Perplexity of text as `veloxquant perplexity` (and llama.cpp) computes it: chunks of "
          "ctx tokens, BOS first, the second half of each scored; chunks: how many (0: all the "
          "text holds); kv: the KV-cache spec; save_kl_base: write the log-probabilities to this "
          "file; kl_base: report KL divergence and top-1 agreement against such a file.")
      .def(
          "perplexity",
          [](const Model& model, const std::filesystem::path& file, size_t context, size_t chunks,
             const std::string& kv, const std::string& save_kl_base, const std::string& kl_base) {
            return perplexity_of(model, read_file(file), context, chunks, kv, save_kl_base, kl_base);
          },
          nb::arg("file"), nb::kw_only(), nb::arg("ctx") = 512, nb::arg("chunks") = 0, nb::arg("kv") = "fp16",
          nb::arg("save_kl_base") = "", nb::arg("kl_base") = "",
          "The same, for the text of a file (a pathlib.Path), like the CLI's -f.")
      .def("calibrate", &calibrate_text, nb::arg("text"), nb::kw_only(), nb::arg("kv"), nb::arg("out"),
           nb::arg("ctx") = 512, nb::arg("max_tokens") = 16384,
           "What `veloxquant calibrate` does: runs the model over text in chunks of ctx tokens (at most "
           "max_tokens; 0: all), fits the calibrated method of the spec kv (kvquant_nuq, spectral, "
           "vecinfer, comm_vq, ratequant) to the keys and values its layers receive, and saves the "
           "artifact into the directory out. Returns a dict: spec (kv with artifacts=out, ready for "
           "kv= of generate, perplexity and eval), path, tokens, layers, kv_heads, head_dim. Raises "
           "SpecError for a method that is not calibrated, Error for a text shorter than one chunk.")
      .def(
          "calibrate",
          [](const Model& model, const std::filesystem::path& file, const std::string& kv,
             const std::string& out, size_t context, size_t max_tokens) {
            return calibrate_text(model, read_file(file), kv, out, context, max_tokens);
          },
          nb::arg("file"), nb::kw_only(), nb::arg("kv"), nb::arg("out"), nb::arg("ctx") = 512,
          nb::arg("max_tokens") = 16384,
          "The same, for the text of a file (a pathlib.Path), like the CLI's -f.");
}

}  // namespace veloxquant::python
