// Error types. Every user-facing failure (bad config, bad .npy, bad shape, hardware rule violation) is one of
// these; the CLI prints what() and exits non-zero. Never abort on bad input.
#pragma once

#include <stdexcept>
#include <string>

namespace trnsim {

// Base class: a message fit to show a user as it is.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Bad input: files, configs, shapes, parameter combinations.
class InputError : public Error {
 public:
  using Error::Error;
};

// A kernel or program broke a hardware rule (partition span, connectivity, bounds, dtype, generation).
class RuleError : public Error {
 public:
  using Error::Error;
};

}  // namespace trnsim
