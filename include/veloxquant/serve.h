// `veloxquant serve`: an OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions,
// /v1/models, /health, /metrics) over a scheduler that batches sequences continuously and admits
// them by the KV memory their caches take (docs/serve.md).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "veloxquant/model.h"

namespace veloxquant {

struct ServeOptions {
  std::string model_id = "model";  // the name /v1/models lists and requests must use
  std::string kv_spec = "fp16";
  size_t context = 0;                  // tokens per sequence; 0: the model's
  size_t kv_memory = size_t{1} << 30;  // bytes of KV pages for all sequences together
  size_t page_tokens = 64;             // tokens per page
  size_t parallel = 16;                // sequences decoded at once
  size_t queue = 64;                   // requests that may wait; more get 429
  size_t step_tokens = 512;            // tokens per forward step (decode tokens, then prompt chunks)
  size_t reserve_tokens = 256;         // generated tokens' pages a request takes when admitted
  double timeout_seconds = 600;        // a request's limit, from arrival to its last token
  double drain_seconds = 30;           // on shutdown, how long in-flight requests may finish
  std::string chat_template;           // a template's source; "": the file's, else ChatML
  std::string host = "127.0.0.1";
  int port = 8080;
};

// Parses sizes such as "8GiB", "512MiB", "1.5GB", "65536" (bytes). Throws Error naming the text.
size_t parse_bytes(const std::string& text);

class Server {
 public:
  // Measures the spec's bytes per token and starts the scheduler. Throws Error for options that
  // cannot work (a spec the registry refuses, a pool that cannot hold one sequence).
  Server(Model model, ServeOptions options);
  ~Server();
  // Binds host:port and serves until shutdown(). Throws Error when the address cannot be bound.
  void listen();
  // Stops admitting (new requests get 503), lets in-flight ones finish for up to drain_seconds,
  // cancels the rest and makes listen() return. Callable from any thread, once or more.
  void shutdown();
  // The KV pool as the scheduler accounts it.
  size_t kv_pages() const;
  size_t kv_page_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace veloxquant
