// SHA-256 of file contents (OpenSSL's libcrypto): what the output folder's manifest records to recognise
// the files a run wrote (sim/io/output_set.h), and what stats.json records of the hardware config read.
// The same digest as `sha256sum`, in lowercase hex (64 characters).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace trnsim::io {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t bytes);
  std::string hex();  // the digest of everything updated so far; call once

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

std::string sha256_hex(std::string_view bytes);

// The SHA-256 of the file open as `fd`, read from its start. Empty when it cannot be read.
std::string sha256_of_fd(int fd);

}  // namespace trnsim::io
