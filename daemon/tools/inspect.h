// `wasted inspect MODEL.gguf [--json]`: what a GGUF file holds, in the terms
// the memory plan needs: format version, architecture and hyperparameters
// (every {arch}.* key), tokenizer, tensor count, bytes by ggml type and by
// part (embeddings, attention, dense FFN, experts, ...), per-layer sizes,
// per-expert size and parameter count.
//
// Any file the GGUF reader accepts is described, including tensor types the
// engine cannot compute; a file it refuses is reported with the reader's one
// line.
#ifndef WASTE_DAEMON_TOOLS_INSPECT_H_
#define WASTE_DAEMON_TOOLS_INSPECT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "storage/env.h"

namespace waste::tools {

// The report for the GGUF at `path`: text, or a JSON document when `json`.
absl::StatusOr<std::string> InspectModel(storage::Env* env, const std::string& path, bool json);

// `wasted inspect`: returns the process exit code (0, 1 for a bad file, 2
// for bad usage).
int RunInspect(const std::vector<std::string>& args);

}  // namespace waste::tools

#endif  // WASTE_DAEMON_TOOLS_INSPECT_H_
