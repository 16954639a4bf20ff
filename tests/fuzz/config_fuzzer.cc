// libFuzzer target for the daemon's TOML config parser (daemon/config):
// tests/fuzz/run_fuzzer.sh config builds and runs it with clang;
// //tests/fuzz:config_fuzzer_test replays the committed seeds.
//
// ParseDaemonConfig on arbitrary text must return a value: a config, or an
// INVALID_ARGUMENT naming the document ("fuzz.toml:LINE..."), never crash.
// An accepted config must take the defaults, merge each model section over
// the model defaults, and survive a proto round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "common/logging.h"
#include "daemon/config/config.h"
#include "google/protobuf/util/message_differencer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<waste::v1::DaemonConfig> config = waste::ParseDaemonConfig(text, "fuzz.toml");
  if (!config.ok()) {
    WCHECK(config.status().code() == absl::StatusCode::kInvalidArgument) << config.status();
    WCHECK(absl::StartsWith(config.status().message(), "fuzz.toml:")) << config.status();
    return 0;
  }
  waste::ApplyDaemonDefaults(&*config);
  WCHECK(!config->socket().empty() && !config->state_dir().empty());
  for (const auto& [name, model] : config->models()) {
    const waste::v1::ModelConfig merged = waste::MergeModelConfig(config->model_defaults(), model);
    (void)merged.ByteSizeLong();
  }
  const std::string bytes = config->SerializeAsString();
  waste::v1::DaemonConfig again;
  WCHECK(again.ParseFromString(bytes));
  WCHECK(google::protobuf::util::MessageDifferencer::Equals(*config, again));
  return 0;
}
