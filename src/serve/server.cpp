// The HTTP front: cpp-httplib routes, each request parsed (openai_api.h), submitted to the
// scheduler and answered whole or as server-sent events while its text comes.
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "serve/metrics.h"
#include "serve/openai_api.h"
#include "serve/scheduler.h"
#include "veloxquant/serve.h"

namespace veloxquant {
namespace {

using nlohmann::json;
using serve::ApiError;
using serve::Clock;
using serve::Endpoint;

long long unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ChatTemplate chat_template_for(const Model& model, const std::string& source) {
  const Tokenizer& tok = model.tokenizer();
  const auto text = [&](int32_t id) { return id >= 0 ? tok.token_text(id) : std::string(); };
  if (!source.empty()) return ChatTemplate::parse(source, text(tok.bos()), text(tok.eos()));
  if (model.file().find("tokenizer.chat_template")) return ChatTemplate::from_gguf(model.file());
  return ChatTemplate::parse(serve::chatml_template(), text(tok.bos()), text(tok.eos()));
}

}  // namespace

size_t parse_bytes(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  double scale = 0;
  for (const auto& [name, factor] :
       std::initializer_list<std::pair<const char*, double>>{{"", 1},
                                                             {"B", 1},
                                                             {"KiB", 1024.0},
                                                             {"MiB", 1024.0 * 1024},
                                                             {"GiB", 1024.0 * 1024 * 1024},
                                                             {"KB", 1e3},
                                                             {"MB", 1e6},
                                                             {"GB", 1e9}}) {
    if (unit == name) scale = factor;
  }
  if (used == 0 || scale == 0 || !(value > 0) || !std::isfinite(value * scale)) {
    throw Error("size '" + text +
                "'; expected a positive number of bytes, optionally with KiB, MiB, GiB, KB, MB or GB");
  }
  return static_cast<size_t>(value * scale);
}

struct Server::Impl {
  ServeOptions options;
  serve::Metrics metrics;
  serve::Scheduler scheduler;
  ChatTemplate chat;
  httplib::Server http;
  std::atomic<bool> shut{false};
  std::atomic<size_t> next_id{0};

  Impl(Model model, ServeOptions o)
      : options(std::move(o)),
        scheduler(model,
                  serve::SchedulerOptions{options.kv_spec, options.context, options.kv_memory,
                                          options.page_tokens, options.parallel, options.queue,
                                          options.step_tokens, options.reserve_tokens},
                  metrics),
        chat(chat_template_for(model, options.chat_template)) {
    // A thread per request that may be in the server at once (running, queued, and a few more
    // to answer 429s, /health and /metrics), so refusals never wait behind slow requests.
    const size_t threads = options.parallel + options.queue + 8;
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(size_t{64} << 20);
    routes();
  }

  void reply_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
    res.set_content(serve::json_text(serve::error_body(e)), "application/json");
    metrics.count_request(e.status);
  }

  void routes() {
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const bool up = !shut;
      res.status = up ? 200 : 503;
      res.set_content(serve::json_text({{"status", up ? "ok" : "shutting down"}}), "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.prometheus(), "text/plain; version=0.0.4");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      const json model = {
          {"id", options.model_id}, {"object", "model"}, {"created", 0}, {"owned_by", "veloxquant"}};
      res.set_content(serve::json_text({{"object", "list"}, {"data", json::array({model})}}),
                      "application/json");
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(Endpoint::Completions, req, res);
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      generate(Endpoint::ChatCompletions, req, res);
    });
    // What no handler caught still gets an answer in OpenAI's shape; the server keeps serving.
    http.set_exception_handler(
        [this](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
          std::string what = "unknown error";
          try {
            std::rethrow_exception(error);
          } catch (const std::exception& e) {
            what = e.what();
          } catch (...) {
          }
          reply_error(res, ApiError(500, "server_error", what));
        });
    http.set_error_handler([this](const httplib::Request&, httplib::Response& res) {
      if (!res.body.empty()) return;
      reply_error(res, ApiError(res.status, "invalid_request_error",
                                "HTTP " + std::to_string(res.status) +
                                    (res.status == 404 ? ": no such endpoint" : "")));
    });
  }

  void generate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
    std::shared_ptr<serve::RequestHandle> handle;
    serve::ParsedRequest parsed;
    try {
      json body;
      try {
        body = json::parse(req.body);
      } catch (const json::parse_error& e) {
        throw ApiError(400, "invalid_request_error", std::string("the body is not JSON: ") + e.what());
      }
      parsed = serve::parse_request(endpoint, body, options.model_id, scheduler.model().tokenizer(), chat);
      parsed.generation.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(options.timeout_seconds));
      try {
        handle = scheduler.submit(parsed.generation);
      } catch (const serve::Refused& e) {
        throw ApiError(e.draining ? 503 : 429, e.draining ? "server_error" : "rate_limit_error", e.what());
      } catch (const Error& e) {
        throw ApiError(400, "invalid_request_error", e.what());
      }
    } catch (const ApiError& e) {
      return reply_error(res, e);
    } catch (const Error& e) {  // a chat template that fails, a tokenizer error
      return reply_error(res, ApiError(400, "invalid_request_error", e.what()));
    }
    const std::string id = (endpoint == Endpoint::Completions ? "cmpl-" : "chatcmpl-") +
                           std::to_string(next_id++);
    const long long created = unix_now();
    if (parsed.stream) return stream(endpoint, std::move(handle), id, created, parsed.stream_usage, res);
    std::string text;
    serve::RequestHandle::Update update;
    while (true) {
      if (!handle->next(update, Clock::now() + std::chrono::seconds(1))) continue;
      text += update.text;
      if (update.finished) break;
    }
    if (const auto e = failure(update)) return reply_error(res, *e);
    res.set_content(serve::json_text(serve::answer(endpoint, id, created, options.model_id, text, update)),
                    "application/json");
    metrics.count_request(200);
  }

  // The error a generation ended with; none when it ended well.
  static std::optional<ApiError> failure(const serve::RequestHandle::Update& end) {
    switch (end.reason) {
      case serve::FinishReason::Timeout: return ApiError(504, "timeout_error", end.error);
      case serve::FinishReason::Cancelled:
        return ApiError(503, "server_error", "the request was cancelled: the server is shutting down");
      case serve::FinishReason::Error: return ApiError(500, "server_error", end.error);
      default: return std::nullopt;
    }
  }

  void stream(Endpoint endpoint, std::shared_ptr<serve::RequestHandle> handle, const std::string& id,
              long long created, bool with_usage, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    auto first = std::make_shared<bool>(true);
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, endpoint, handle, id, created, with_usage, first](size_t, httplib::DataSink& sink) {
          const auto send = [&](const json& data) {
            const std::string event = "data: " + serve::json_text(data) + "\n\n";
            return sink.write(event.data(), event.size());
          };
          serve::RequestHandle::Update update;
          if (!handle->next(update, Clock::now() + std::chrono::milliseconds(200))) {
            if (sink.is_writable()) return true;  // nothing yet: called again
            handle->cancel();
            return false;
          }
          if (!update.text.empty() || (*first && !update.finished)) {
            if (!send(serve::chunk(endpoint, id, created, options.model_id, update.text, nullptr, *first))) {
              handle->cancel();  // the client is gone: its pages go back at the next step
              return false;
            }
            *first = false;
          }
          if (!update.finished) return true;
          if (const auto e = failure(update)) {
            send(serve::error_body(*e));
            metrics.count_request(e->status);
          } else {
            send(serve::chunk(endpoint, id, created, options.model_id, "", finish_reason_name(update.reason),
                              *first));
            if (with_usage) {
              json tail = serve::chunk(endpoint, id, created, options.model_id, "", nullptr, false);
              tail["choices"] = json::array();
              tail["usage"] = serve::usage(update);
              send(tail);
            }
            metrics.count_request(200);
          }
          const std::string done = "data: [DONE]\n\n";
          sink.write(done.data(), done.size());
          sink.done();
          return true;
        },
        [handle](bool) { handle->cancel(); });  // a no-op once it finished
  }
};

Server::Server(Model model, ServeOptions options)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(options))) {}
Server::~Server() = default;

void Server::listen() {
  Impl& s = *impl_;
  // httplib listens with a backlog of 5: a burst of clients overflows the accept queue while the
  // accept loop is slow (a loaded machine), and some then see their connection reset. The bound
  // socket is the last one httplib configured; listening again on it raises the backlog.
  std::atomic<socket_t> bound{INVALID_SOCKET};
  s.http.set_socket_options([&bound](socket_t sock) {
    httplib::default_socket_options(sock);
    bound = sock;
  });
  if (!s.http.bind_to_port(s.options.host, s.options.port)) {
    throw Error("cannot listen on " + s.options.host + ":" + std::to_string(s.options.port) +
                " (in use, or not an address of this machine)");
  }
  s.http.set_socket_options(httplib::default_socket_options);  // drops the reference to `bound`
  // If this fails, httplib's backlog stays, which still serves.
  if (bound != INVALID_SOCKET) (void)::listen(bound, SOMAXCONN);
  s.http.listen_after_bind();
}

void Server::shutdown() {
  Impl& s = *impl_;
  if (s.shut.exchange(true)) return;
  s.scheduler.drain(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(s.options.drain_seconds)));
  s.http.stop();
}

size_t Server::kv_pages() const { return impl_->scheduler.pages().total(); }
size_t Server::kv_page_bytes() const { return impl_->scheduler.pages().page_bytes(); }

}  // namespace veloxquant
