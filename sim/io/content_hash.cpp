#include "sim/io/content_hash.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <vector>

namespace trnsim::io {

struct Sha256::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  if (ctx_->md == nullptr || EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256: OpenSSL cannot start a digest");
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t bytes) {
  if (bytes != 0 && EVP_DigestUpdate(ctx_->md, data, bytes) != 1)
    throw std::runtime_error("SHA-256: OpenSSL digest update failed");
}

std::string Sha256::hex() {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(ctx_->md, d, &n) != 1) throw std::runtime_error("SHA-256: OpenSSL digest failed");
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < n; ++i) {
    s += kHex[d[i] >> 4];
    s += kHex[d[i] & 15];
  }
  return s;
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 h;
  h.update(bytes.data(), bytes.size());
  return h.hex();
}

std::string sha256_of_fd(int fd) {
  Sha256 h;
  std::vector<char> buf(1 << 20);
  off_t at = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return "";
    if (n == 0) break;
    h.update(buf.data(), static_cast<size_t>(n));
    at += n;
  }
  return h.hex();
}

}  // namespace trnsim::io
