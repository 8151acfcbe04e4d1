#include <charconv>
#include <cmath>
#include <sstream>

#include "veloxquant/error.h"
#include "veloxquant/spec.h"

namespace veloxquant {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Shortest text that reads back to the same double.
std::string format_number(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  return std::string(buf, end);
}

// Integers in plain digits: the shortest double form writes 1000000 as "1e+06", which an
// integer parameter does not parse back.
std::string format_value(ParamType type, double v) {
  return type == ParamType::Int ? std::to_string(static_cast<long long>(v)) : format_number(v);
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

}  // namespace

ParamDef ParamDef::integer(std::string name, long def, long lo, long hi, std::string help) {
  ParamDef p;
  p.name = std::move(name);
  p.type = ParamType::Int;
  p.default_value = static_cast<double>(def);
  p.min = static_cast<double>(lo);
  p.max = static_cast<double>(hi);
  p.help = std::move(help);
  return p;
}

ParamDef ParamDef::real(std::string name, double def, double lo, double hi, std::string help) {
  ParamDef p;
  p.name = std::move(name);
  p.type = ParamType::Float;
  p.default_value = def;
  p.min = lo;
  p.max = hi;
  p.help = std::move(help);
  return p;
}

ParamDef ParamDef::boolean(std::string name, bool def, std::string help) {
  ParamDef p;
  p.name = std::move(name);
  p.type = ParamType::Bool;
  p.default_value = def ? 1 : 0;
  p.min = 0;
  p.max = 1;
  p.help = std::move(help);
  return p;
}

ParamDef ParamDef::choice(std::string name, std::vector<std::string> choices, std::string def,
                          std::string help) {
  ParamDef p;
  p.name = std::move(name);
  p.type = ParamType::Choice;
  p.choices = std::move(choices);
  p.default_choice = std::move(def);
  p.help = std::move(help);
  return p;
}

ParamDef ParamDef::text(std::string name, std::string help) {
  ParamDef p;
  p.name = std::move(name);
  p.type = ParamType::Text;
  p.help = std::move(help);
  return p;
}

std::string ParamDef::format_default() const {
  switch (type) {
    case ParamType::Int:
    case ParamType::Float: return format_value(type, default_value);
    case ParamType::Bool: return default_value != 0 ? "true" : "false";
    case ParamType::Choice: return default_choice;
    case ParamType::Text: return default_choice.empty() ? "(none)" : default_choice;
  }
  return "";
}

std::string ParamDef::describe() const {
  switch (type) {
    case ParamType::Int:
    case ParamType::Float:
      return format_default() + " (" + format_value(type, min) + ".." + format_value(type, max) + ")";
    case ParamType::Bool: return format_default() + " (true|false)";
    case ParamType::Choice: return default_choice + " (" + join(choices, "|") + ")";
    case ParamType::Text: return format_default() + " (text)";
  }
  return "";
}

long Params::get_int(std::string_view name) const {
  auto it = numbers.find(name);
  if (it == numbers.end()) throw SpecError("no integer parameter '" + std::string(name) + "'");
  return static_cast<long>(it->second);
}

double Params::get_float(std::string_view name) const {
  auto it = numbers.find(name);
  if (it == numbers.end()) throw SpecError("no numeric parameter '" + std::string(name) + "'");
  return it->second;
}

bool Params::get_bool(std::string_view name) const { return get_float(name) != 0; }

const std::string& Params::get_choice(std::string_view name) const {
  auto it = strings.find(name);
  if (it == strings.end()) throw SpecError("no choice parameter '" + std::string(name) + "'");
  return it->second;
}

const std::string& Params::get_text(std::string_view name) const {
  auto it = strings.find(name);
  if (it == strings.end()) throw SpecError("no text parameter '" + std::string(name) + "'");
  return it->second;
}

std::string Params::format(const ParamDef& def) const {
  switch (def.type) {
    case ParamType::Int:
    case ParamType::Float: return format_value(def.type, get_float(def.name));
    case ParamType::Bool: return get_bool(def.name) ? "true" : "false";
    case ParamType::Choice: return get_choice(def.name);
    case ParamType::Text: return get_text(def.name);
  }
  return "";
}

RawSpec parse_raw_spec(std::string_view text) {
  const std::string_view whole = trim(text);
  if (whole.empty()) throw SpecError("empty spec; expected 'method' or 'method:name=value,...'");
  RawSpec raw;
  const size_t colon = whole.find(':');
  raw.method = std::string(trim(whole.substr(0, colon)));
  if (raw.method.empty()) {
    throw SpecError("spec '" + std::string(whole) + "' has no method name before ':'");
  }
  if (colon == std::string_view::npos) return raw;
  std::string_view rest = whole.substr(colon + 1);
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    const size_t eq = item.find('=');
    if (item.empty() || eq == std::string_view::npos || trim(item.substr(0, eq)).empty() ||
        trim(item.substr(eq + 1)).empty()) {
      throw SpecError("spec '" + std::string(whole) + "': argument '" + std::string(item) +
                      "' is not of the form name=value");
    }
    raw.args.emplace_back(std::string(trim(item.substr(0, eq))),
                          std::string(trim(item.substr(eq + 1))));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return raw;
}

Params resolve_params(const std::string& method, const std::vector<ParamDef>& defs,
                      const std::vector<std::pair<std::string, std::string>>& args) {
  Params p;
  for (const auto& d : defs) {
    if (d.type == ParamType::Choice || d.type == ParamType::Text) p.strings[d.name] = d.default_choice;
    else p.numbers[d.name] = d.default_value;
  }
  std::vector<std::string> seen;
  for (const auto& [name, value] : args) {
    const ParamDef* def = nullptr;
    for (const auto& d : defs)
      if (d.name == name) def = &d;
    if (def == nullptr) {
      std::vector<std::string> names;
      for (const auto& d : defs) names.push_back(d.name);
      throw SpecError(method + ": unknown parameter '" + name + "'; expected one of: " +
                      (names.empty() ? std::string("(none)") : join(names, ", ")));
    }
    for (const auto& s : seen)
      if (s == name) throw SpecError(method + ": parameter '" + name + "' given twice");
    seen.push_back(name);
    const std::string where = method + ": " + name + "=" + value;
    switch (def->type) {
      case ParamType::Int:
      case ParamType::Float: {
        double v = 0;
        bool ok;
        if (def->type == ParamType::Int) {
          long iv = 0;
          auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), iv);
          ok = ec == std::errc() && end == value.data() + value.size();
          v = static_cast<double>(iv);
        } else {
          auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
          ok = ec == std::errc() && end == value.data() + value.size() && std::isfinite(v);
        }
        if (!ok) {
          throw SpecError(where + " is not " +
                          (def->type == ParamType::Int ? "an integer" : "a finite number") +
                          "; expected " + format_number(def->min) + ".." + format_number(def->max));
        }
        if (v < def->min || v > def->max) {
          throw SpecError(where + " is out of range; expected " + format_number(def->min) + ".." +
                          format_number(def->max));
        }
        p.numbers[name] = v;
        break;
      }
      case ParamType::Bool:
        if (value == "true" || value == "1") p.numbers[name] = 1;
        else if (value == "false" || value == "0") p.numbers[name] = 0;
        else throw SpecError(where + " is not a boolean; expected true or false");
        break;
      case ParamType::Choice: {
        bool found = false;
        for (const auto& c : def->choices) found = found || c == value;
        if (!found) throw SpecError(where + " is not allowed; expected one of: " + join(def->choices, ", "));
        p.strings[name] = value;
        break;
      }
      case ParamType::Text:
        // The spec syntax splits on ',' and '+', so a value holding them could not be written
        // back; '=' would make the canonical text ambiguous.
        if (value.find_first_of(",+=") != std::string::npos) {
          throw SpecError(where + " holds ',', '+' or '='; expected text without them");
        }
        p.strings[name] = value;
        break;
    }
  }
  return p;
}

std::string format_spec(const std::string& method, const std::vector<ParamDef>& defs,
                        const Params& p) {
  std::string s = method;
  bool first = true;
  for (const ParamDef& d : defs) {
    const std::string value = p.format(d);
    if (d.type == ParamType::Text && value.empty()) continue;  // "name=" would not parse back
    s += (first ? ":" : ",") + d.name + "=" + value;
    first = false;
  }
  return s;
}

}  // namespace veloxquant
