// Errors raised by VeloxQuant. Every message names the offending value and what was expected.
#pragma once

#include <stdexcept>
#include <string>

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

}  // namespace veloxquant
