#include "sim/io/file_kind.h"

#include <filesystem>

namespace trnsim::io {

FileKind file_kind(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);  // follows symlinks
  if (ec || !fs::exists(st)) return FileKind::kMissing;
  if (fs::is_directory(st)) return FileKind::kDirectory;
  return fs::is_regular_file(st) ? FileKind::kRegular : FileKind::kSpecial;
}

}  // namespace trnsim::io
