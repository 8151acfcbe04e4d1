// Spec strings: "method:name=value,name=value". One parser for CLI, tests, benchmarks and bindings.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace veloxquant {

// Text: a free string (a directory for artifacts=DIR), empty by default; an empty value is left
// out of the canonical spec. It may not contain ',' '+' or '=', which the spec syntax uses.
enum class ParamType { Int, Float, Bool, Choice, Text };

// A method parameter: its type, default, allowed range (or choices) and one line of help.
struct ParamDef {
  std::string name;
  ParamType type = ParamType::Int;
  double default_value = 0;  // Int / Float / Bool (0 or 1); Choice uses default_choice
  double min = 0, max = 0;   // inclusive range for Int / Float
  std::vector<std::string> choices;
  std::string default_choice;
  std::string help;

  static ParamDef integer(std::string name, long def, long lo, long hi, std::string help);
  static ParamDef real(std::string name, double def, double lo, double hi, std::string help);
  static ParamDef boolean(std::string name, bool def, std::string help);
  static ParamDef choice(std::string name, std::vector<std::string> choices, std::string def,
                         std::string help);
  static ParamDef text(std::string name, std::string help);
  // "2 (1..8)", "0.5 (0..1)", "true (true|false)", "mse (mse|fp16)", "(none) (text)"
  std::string describe() const;
  std::string format_default() const;
};

// Parameter values of one method after validation: every declared parameter has a value.
class Params {
 public:
  Params() = default;
  long get_int(std::string_view name) const;
  double get_float(std::string_view name) const;
  bool get_bool(std::string_view name) const;
  const std::string& get_choice(std::string_view name) const;
  const std::string& get_text(std::string_view name) const;
  // Canonical text of a value ("2", "0.25", "true", "mse").
  std::string format(const ParamDef& def) const;
  bool operator==(const Params&) const = default;

  std::map<std::string, double, std::less<>> numbers;
  std::map<std::string, std::string, std::less<>> strings;
};

// A parsed spec before validation: method name plus raw "name=value" pairs, in order.
struct RawSpec {
  std::string method;
  std::vector<std::pair<std::string, std::string>> args;
};

// Splits "method:a=1,b=2" (whitespace around tokens ignored). Throws SpecError on syntax errors.
RawSpec parse_raw_spec(std::string_view text);

// Validates raw arguments against declared parameters, filling defaults. Throws SpecError that
// names the parameter and its allowed values on an unknown name, a bad value or a value out of range.
Params resolve_params(const std::string& method, const std::vector<ParamDef>& defs,
                      const std::vector<std::pair<std::string, std::string>>& args);

// Canonical spec text: every parameter in declared order, so parse(format) == original.
std::string format_spec(const std::string& method, const std::vector<ParamDef>& defs,
                        const Params& p);

}  // namespace veloxquant
