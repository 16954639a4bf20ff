// The daemon's configuration: the TOML file (deploy/wasted.toml documents
// every key), merged under command-line flags, into waste.v1.DaemonConfig.
#ifndef WASTE_DAEMON_CONFIG_CONFIG_H_
#define WASTE_DAEMON_CONFIG_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/format.h"  // ParseByteSize, for byte-size settings
#include "waste/v1/config.pb.h"

namespace waste {

// Parses a TOML document into a DaemonConfig. Unknown keys and values of the
// wrong type are errors naming the key and line, so a typo is not silently
// ignored. `source` names the document in messages.
absl::StatusOr<v1::DaemonConfig> ParseDaemonConfig(absl::string_view toml,
                                                   absl::string_view source);

// Reads and parses a config file.
absl::StatusOr<v1::DaemonConfig> LoadDaemonConfig(const std::string& path);

// Fills in defaults for fields the file and flags left unset (socket path,
// log level, state dir).
void ApplyDaemonDefaults(v1::DaemonConfig* config);

// Overlays `overrides` onto `base`: each field set in overrides wins.
v1::ModelConfig MergeModelConfig(const v1::ModelConfig& base, const v1::ModelConfig& overrides);

}  // namespace waste

#endif  // WASTE_DAEMON_CONFIG_CONFIG_H_
