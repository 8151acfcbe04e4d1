// OpenAI's request and response shapes for /v1/completions and /v1/chat/completions: what a
// request body asks for (checked field by field), and the JSON of answers, stream chunks and
// errors.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "serve/scheduler.h"
#include "veloxquant/chat_template.h"
#include "veloxquant/tokenizer.h"

namespace veloxquant::serve {

// An error answered with an HTTP status in OpenAI's shape: {"error": {"message", "type",
// "param", "code"}}.
struct ApiError : Error {
  ApiError(int http_status, std::string error_type, const std::string& message, std::string error_param = "",
           std::string error_code = "")
      : Error(message),
        status(http_status),
        type(std::move(error_type)),
        param(std::move(error_param)),
        code(std::move(error_code)) {}
  int status;
  std::string type, param, code;
};
nlohmann::json error_body(const ApiError& e);

// JSON text of a body or an event. Generated text need not be valid UTF-8 (a sampled byte-level
// token may end mid-character): invalid bytes become U+FFFD rather than failing the answer.
std::string json_text(const nlohmann::json& body);

enum class Endpoint { Completions, ChatCompletions };

struct ParsedRequest {
  GenerationRequest generation;
  bool stream = false;
  bool stream_usage = false;  // stream_options.include_usage
};

// Checks every field this server reads (type and range; unknown fields are ignored, as OpenAI's
// optional ones) and tokenizes the prompt: a completion's text as `generate` does (BOS added as
// the vocabulary asks), a chat's messages rendered by `chat` with special tokens parsed. Throws
// ApiError 400 naming the field, 404 for another model than `model_id`.
ParsedRequest parse_request(Endpoint endpoint, const nlohmann::json& body, const std::string& model_id,
                            const Tokenizer& tokenizer, const ChatTemplate& chat);

// The answer when the generation is whole, and the chunks of a stream (data of server-sent
// events); `created` in Unix seconds.
nlohmann::json answer(Endpoint endpoint, const std::string& id, long long created,
                      const std::string& model_id, const std::string& text, const RequestHandle::Update& end);
nlohmann::json chunk(Endpoint endpoint, const std::string& id, long long created, const std::string& model_id,
                     const std::string& text, const char* finish_reason, bool first);
nlohmann::json usage(const RequestHandle::Update& end);

// A sequence of chat messages as the fallback template renders them (ChatML), for a model whose
// file has no tokenizer.chat_template, as llama.cpp's server falls back.
const char* chatml_template();

}  // namespace veloxquant::serve
