// What every fuzz target asserts about an input the code rejects: the error is one of trnsim's own (bad input
// or a hardware rule, never a library exception, an abort or a crash), and its message is fit to print: no
// NUL byte (it would cut the printed line) and only a short excerpt of any value, never the value itself (a
// message may be at most 2 KiB plus half the input's size, so with inputs of 8 KiB and more an echo of a
// large value is caught).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "sim/base/error.h"

namespace trnsim::fuzz {

[[noreturn]] inline void die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz: %s: %.2000s\n", what, detail.c_str());
  std::abort();
}

inline void check_message(const std::string& m, size_t input_size) {
  if (m.empty()) die("empty error message", m);
  if (m.find('\0') != std::string::npos) die("NUL byte in the error message", m);
  if (m.size() > 2048 + input_size / 2)
    die("error message too long", std::to_string(m.size()) + " bytes: " + m.substr(0, 1000));
}

// Runs f(); a trnsim::Error is checked as above, any other exception aborts the fuzzer.
template <typename F>
void run(size_t input_size, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    check_message(e.what(), input_size);
  } catch (const std::exception& e) {
    die("exception other than trnsim::Error", e.what());
  }
}

// A private scratch folder for inputs that must be files (removed at exit).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "trnsim_fuzz_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) die("mkdtemp", tmpl);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

// A new file each time: an ext4 file truncated and written again is flushed to disk when it is closed
// (auto_da_alloc): about 7 % of fuzz_workload's time (perf, under load).
inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = (scratch_dir() / name).string();
  std::error_code ec;
  std::filesystem::remove(path, ec);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!f) die("cannot write the scratch file", path);
  return path;
}

}  // namespace trnsim::fuzz
