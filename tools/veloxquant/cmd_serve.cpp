// `veloxquant serve`: the OpenAI-compatible server (docs/serve.md). SIGTERM or SIGINT drains it:
// new requests get 503, those in flight finish (or are cancelled after --drain-timeout), and the
// process exits 0.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "commands.h"
#include "run_stats.h"
#include "veloxquant/serve.h"

namespace veloxquant::cli {
namespace {

struct ServeArgs {
  std::string model, alias, kv_memory = "1GiB", chat_template;
  ServeOptions options;
  int threads = 0;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read chat template " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// SIGTERM and SIGINT write their number to a pipe that a thread of the server reads: whichever
// thread the signal lands on (the BLAS library starts its own), the handler does only that.
int signal_pipe[2] = {-1, -1};

void on_signal(int number) {
  const char byte = static_cast<char>(number);
  [[maybe_unused]] const ssize_t written = write(signal_pipe[1], &byte, 1);
}

void run(ServeArgs& a) {
  set_threads(a.threads);
  ServeOptions& o = a.options;
  o.kv_memory = parse_bytes(a.kv_memory);
  o.model_id = a.alias.empty() ? std::filesystem::path(a.model).stem().string() : a.alias;
  if (!a.chat_template.empty()) o.chat_template = read_file(a.chat_template);
  Server server(Model::load(a.model), o);
  fmt::print(stderr, "serve:     {} as '{}', kv {}, {} pages of {} B ({} MiB), {} sequences at once\n",
             a.model, o.model_id, o.kv_spec, grouped(server.kv_pages()), grouped(server.kv_page_bytes()),
             server.kv_pages() * server.kv_page_bytes() >> 20, o.parallel);
  if (pipe(signal_pipe) != 0) throw Error("serve: cannot create the signal pipe");
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::thread watcher([&] {
    char got = 0;
    if (read(signal_pipe[0], &got, 1) != 1 || got == 0) return;  // 0: listen() failed, nothing to drain
    fmt::print(stderr, "serve:     {}: draining\n", got == SIGTERM ? "SIGTERM" : "SIGINT");
    server.shutdown();
  });
  fmt::print(stderr, "serve:     listening on http://{}:{}\n", o.host, o.port);
  try {
    server.listen();
  } catch (...) {
    on_signal(0);
    watcher.join();
    throw;
  }
  watcher.join();
  fmt::print(stderr, "serve:     stopped\n");
}

}  // namespace

Command add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  ServeOptions& o = a->options;
  auto* cmd = app.add_subcommand("serve",
                                 "Serve a GGUF model over an OpenAI-compatible HTTP API (docs/serve.md)");
  cmd->add_option("-m,--model", a->model, "GGUF model file")->required();
  cmd->add_option("--alias", a->alias,
                  "the model's name in the API (default: the file's name without .gguf)");
  cmd->add_option("--kv", o.kv_spec, "KV-cache method spec for every sequence (see `veloxquant methods`)")
      ->capture_default_str();
  cmd->add_option("--kv-memory", a->kv_memory, "KV memory for all sequences together, e.g. 8GiB, 512MiB")
      ->capture_default_str();
  cmd->add_option("-c,--ctx", o.context, "tokens per sequence (0: the model's context)")
      ->capture_default_str();
  cmd->add_option("--parallel", o.parallel, "sequences decoded at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--queue", o.queue, "requests that may wait for admission; more get 429")
      ->capture_default_str();
  cmd->add_option("--step-tokens", o.step_tokens,
                  "tokens per forward step (decode tokens, then prompt chunks)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--reserve-tokens", o.reserve_tokens,
                  "generated tokens' pages a request takes when admitted (at most its max_tokens)")
      ->capture_default_str();
  cmd->add_option("--page-tokens", o.page_tokens, "tokens per KV page")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--timeout", o.timeout_seconds, "seconds a request may take, queue included")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--drain-timeout", o.drain_seconds, "on SIGTERM, seconds in-flight requests may finish")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--chat-template", a->chat_template,
                  "a Jinja chat template file (default: the GGUF's tokenizer.chat_template, else ChatML)");
  cmd->add_option("--host", o.host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o.port, "port to listen on")->capture_default_str()->check(CLI::Range(1, 65535));
  add_threads_option(cmd, a->threads);
  return [a] { run(*a); };
}

}  // namespace veloxquant::cli
