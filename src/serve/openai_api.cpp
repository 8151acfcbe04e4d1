#include "serve/openai_api.h"

#include <algorithm>
#include <limits>
#include <random>

namespace veloxquant::serve {
namespace {

using nlohmann::json;

ApiError bad_field(const std::string& field, const std::string& expected, const json& got) {
  return ApiError(400, "invalid_request_error", "'" + field + "' is " + got.dump() + "; expected " + expected,
                  field);
}

// The field's value when present and not null; a type or range error names it.
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& body, const char* name, double fallback, double low, double high,
              const char* range) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) throw bad_field(name, std::string("a number ") + range, *v);
  const double x = v->get<double>();
  if (!(x >= low && x <= high)) throw bad_field(name, range, *v);
  return x;
}

long long integer(const json& body, const char* name, long long fallback, long long low, long long high,
                  const char* range) {
  const json* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number_integer() && !v->is_number_unsigned())
    throw bad_field(name, std::string("an integer ") + range, *v);
  if (v->is_number_unsigned() && v->get<unsigned long long>() > static_cast<unsigned long long>(high))
    throw bad_field(name, range, *v);
  const long long x = v->is_number_unsigned() ? static_cast<long long>(v->get<unsigned long long>())
                                              : v->get<long long>();
  if (x < low || x > high) throw bad_field(name, range, *v);
  return x;
}

bool boolean(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return false;
  if (!v->is_boolean()) throw bad_field(name, "true or false", *v);
  return v->get<bool>();
}

std::vector<std::string> stops(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) throw bad_field("stop", "a string or an array of strings", *v);
  std::vector<std::string> out;
  for (const json& s : *v) {
    if (!s.is_string()) throw bad_field("stop", "a string or an array of strings", *v);
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::vector<int32_t> completion_prompt(const json& body, const Tokenizer& tok) {
  const json* v = field(body, "prompt");
  if (!v) throw ApiError(400, "invalid_request_error", "'prompt' is missing; expected a string", "prompt");
  if (v->is_array() && v->size() == 1 && (*v)[0].is_string()) v = &(*v)[0];
  if (v->is_string()) return tok.encode(v->get<std::string>(), /*add_special=*/true);
  if (v->is_array() && !v->empty() &&
      std::all_of(v->begin(), v->end(), [](const json& t) { return t.is_number_integer(); })) {
    std::vector<int32_t> ids;
    for (const json& t : *v) {
      const long long id = t.get<long long>();
      if (id < 0 || static_cast<size_t>(id) >= tok.vocab_size())
        throw bad_field("prompt", "token ids in 0.." + std::to_string(tok.vocab_size() - 1), t);
      ids.push_back(static_cast<int32_t>(id));
    }
    return ids;
  }
  throw bad_field("prompt",
                  "a string, an array of one string, or an array of token ids (one prompt per request)", *v);
}

std::vector<int32_t> chat_prompt(const json& body, const Tokenizer& tok, const ChatTemplate& chat) {
  const json* messages = field(body, "messages");
  if (!messages || !messages->is_array() || messages->empty())
    throw bad_field("messages", "a non-empty array of messages", messages ? *messages : json());
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_field(where, "an object with 'role' and 'content'", m);
    if (!m.contains("role") || !m["role"].is_string())
      throw bad_field(where + ".role", "a string", m.value("role", json()));
    if (m.contains("content") && !m["content"].is_string() && !m["content"].is_array() &&
        !m["content"].is_null())
      throw bad_field(where + ".content", "a string, an array of content parts or null", m["content"]);
  }
  ChatTemplateOptions options;
  if (const json* tools = field(body, "tools")) options.tools_json = tools->dump();
  if (const json* extra = field(body, "chat_template_kwargs")) {
    if (!extra->is_object()) throw bad_field("chat_template_kwargs", "an object", *extra);
    options.extra_context_json = extra->dump();
  }
  std::string text;
  try {
    text = chat.render(messages->dump(), options);
  } catch (const ChatTemplateRaised& e) {
    throw ApiError(400, "invalid_request_error", "the chat template refused the messages: " + e.message(),
                   "messages");
  }
  // The rendered text names its special tokens; BOS is added unless the template wrote it.
  const bool has_bos = !chat.bos_token().empty() && text.starts_with(chat.bos_token());
  return tok.encode(text, /*add_special=*/!has_bos, /*parse_special=*/true);
}

}  // namespace

json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? json() : json(e.param)},
            {"code", e.code.empty() ? json() : json(e.code)}}}};
}

ParsedRequest parse_request(Endpoint endpoint, const json& body, const std::string& model_id,
                            const Tokenizer& tok, const ChatTemplate& chat) {
  if (!body.is_object())
    throw ApiError(400, "invalid_request_error",
                   "the body is " + std::string(body.type_name()) + "; expected a JSON object");
  if (const json* model = field(body, "model")) {
    if (!model->is_string()) throw bad_field("model", "a string", *model);
    if (model->get<std::string>() != model_id)
      throw ApiError(404, "invalid_request_error",
                     "the model '" + model->get<std::string>() + "' does not exist; this server serves '" +
                         model_id + "'",
                     "model", "model_not_found");
  }
  if (integer(body, "n", 1, 1, 1, "1 (one choice per request)") != 1) throw bad_field("n", "1", body["n"]);
  ParsedRequest r;
  GenerationRequest& g = r.generation;
  g.prompt = endpoint == Endpoint::Completions ? completion_prompt(body, tok) : chat_prompt(body, tok, chat);
  constexpr long long kMost = std::numeric_limits<int32_t>::max();
  const char* max_name = endpoint == Endpoint::ChatCompletions && field(body, "max_completion_tokens")
                             ? "max_completion_tokens"
                             : "max_tokens";
  // A completion's default is OpenAI's 16; a chat's, as many as the context allows.
  g.max_tokens = static_cast<size_t>(
      integer(body, max_name, endpoint == Endpoint::Completions ? 16 : kMost, 1, kMost, ">= 1"));
  SamplerOptions& s = g.sampling;
  s.temperature = static_cast<float>(number(body, "temperature", s.temperature, 0, 100, ">= 0"));
  s.top_p = static_cast<float>(
      number(body, "top_p", s.top_p, std::numeric_limits<double>::min(), 1, "in (0, 1]"));
  s.top_k = static_cast<int>(integer(body, "top_k", s.top_k, 0, kMost, ">= 0"));
  s.repeat_penalty = static_cast<float>(
      number(body, "repeat_penalty", s.repeat_penalty, std::numeric_limits<double>::min(), 100, "> 0"));
  // Without a seed, each request draws its own, as `generate` does.
  s.seed = field(body, "seed")
               ? static_cast<uint64_t>(integer(body, "seed", 0, std::numeric_limits<long long>::min(),
                                               std::numeric_limits<long long>::max(), "an integer"))
               : std::random_device{}();
  g.stop = stops(body);
  r.stream = boolean(body, "stream");
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) throw bad_field("stream_options", "an object", *options);
    r.stream_usage = boolean(*options, "include_usage");
  }
  return r;
}

std::string json_text(const json& body) { return body.dump(-1, ' ', false, json::error_handler_t::replace); }

json usage(const RequestHandle::Update& end) {
  return {{"prompt_tokens", end.prompt_tokens},
          {"completion_tokens", end.completion_tokens},
          {"total_tokens", end.prompt_tokens + end.completion_tokens}};
}

json answer(Endpoint endpoint, const std::string& id, long long created, const std::string& model_id,
            const std::string& text, const RequestHandle::Update& end) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason_name(end.reason)}, {"logprobs", nullptr}};
  if (endpoint == Endpoint::Completions) choice["text"] = text;
  else choice["message"] = {{"role", "assistant"}, {"content", text}};
  return {{"id", id},
          {"object", endpoint == Endpoint::Completions ? "text_completion" : "chat.completion"},
          {"created", created},
          {"model", model_id},
          {"choices", json::array({choice})},
          {"usage", usage(end)}};
}

json chunk(Endpoint endpoint, const std::string& id, long long created, const std::string& model_id,
           const std::string& text, const char* finish_reason, bool first) {
  json choice = {
      {"index", 0}, {"finish_reason", finish_reason ? json(finish_reason) : json()}, {"logprobs", nullptr}};
  if (endpoint == Endpoint::Completions) {
    choice["text"] = text;
  } else {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && !finish_reason)) delta["content"] = text;
    choice["delta"] = delta;
  }
  return {{"id", id},
          {"object", endpoint == Endpoint::Completions ? "text_completion" : "chat.completion.chunk"},
          {"created", created},
          {"model", model_id},
          {"choices", json::array({choice})}};
}

const char* chatml_template() {
  return "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
         "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% "
         "endif %}";
}

}  // namespace veloxquant::serve
