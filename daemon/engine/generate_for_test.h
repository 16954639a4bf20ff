// GenerateGreedy: a whole greedy generation through LoadedModel::Generate,
// for the engine's tests: the status it ended with and every token id it
// streamed (stop at EOS off, so the count is max_tokens unless it failed).
#ifndef WASTE_DAEMON_ENGINE_GENERATE_FOR_TEST_H_
#define WASTE_DAEMON_ENGINE_GENERATE_FOR_TEST_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "daemon/engine/loaded_model.h"

namespace waste::engine {

struct GreedyResult {
  absl::Status status;
  std::vector<int32_t> ids;
};

inline GreedyResult GenerateGreedy(LoadedModel& model, int max_tokens) {
  v1::GenerateRequest request;
  request.set_max_tokens(max_tokens);
  request.set_stop_at_eos(false);
  GreedyResult result;
  result.status = model.Generate(
      request,
      [&](const v1::GenerateEvent& event) {
        if (event.has_token() && event.token().id() >= 0) result.ids.push_back(event.token().id());
        return true;
      },
      nullptr);
  return result;
}

}  // namespace waste::engine

#endif  // WASTE_DAEMON_ENGINE_GENERATE_FOR_TEST_H_
