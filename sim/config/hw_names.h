// The hardware configs a name can pick (configs/hw/*.json), for messages and help texts that list them.
#pragma once

#include <string>
#include <vector>

namespace trnsim::config {

// The names resolve_config_path finds (sim/config/hw_config.h): each <name>.json of the folders it looks in
// ($TRNSIM_CONFIG_DIR when set, then the source tree's configs/hw), sorted, each once. A folder that cannot
// be read adds nothing.
std::vector<std::string> known_hw_configs();

}  // namespace trnsim::config
