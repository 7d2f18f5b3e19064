// --overwrite for one test's scope (sim/io/replace_check.h): for a test that replaces, on purpose, a file it
// wrote itself as "the user's".
#pragma once

#include "sim/io/replace_check.h"

namespace trnsim::test_util {

struct AllowOverwrite {
  AllowOverwrite() { io::set_overwrite_allowed(true); }
  ~AllowOverwrite() { io::set_overwrite_allowed(false); }
  AllowOverwrite(const AllowOverwrite&) = delete;
  AllowOverwrite& operator=(const AllowOverwrite&) = delete;
};

}  // namespace trnsim::test_util
