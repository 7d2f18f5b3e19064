// The JSON reader lives in sim/io/json_document.h (the output folder's manifest is read with it too); its
// names are also available here for the config code and its users.
#pragma once

#include "sim/io/json_document.h"

namespace trnsim::config {

using io::kMaxJsonDepth;
using io::kMaxJsonKeyBytes;
using io::parse_json_document;
using io::parse_json_value;
using io::read_json_document;

}  // namespace trnsim::config
