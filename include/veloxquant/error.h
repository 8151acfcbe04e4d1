// Errors raised by VeloxQuant. Every message names the offending value and what was expected.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace veloxquant {

// Base of every exception the library throws on bad input or misuse.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A spec string or a method parameter is malformed or out of range.
class SpecError : public Error {
 public:
  using Error::Error;
};

// A tensor has the wrong shape, dtype, or contains NaN/Inf.
class ShapeError : public Error {
 public:
  using Error::Error;
};

// A GGUF file, session file or calibration artifact is corrupt, truncated, of an unsupported
// version, or asks for something it lacks.
class FormatError : public Error {
 public:
  using Error::Error;
};

// Throws E("<context>: <what>") unless `ok`: the one-line checks of a method's parameters (E is
// SpecError) or of a backend's configuration.
template <class E = SpecError>
void require(bool ok, std::string_view context, const std::string& what) {
  if (!ok) throw E(std::string(context) + ": " + what);
}

}  // namespace veloxquant
