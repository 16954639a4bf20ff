#include "daemon/text/stop_matcher.h"

#include <algorithm>

namespace waste::text {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  size_t longest = 0;
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    longest = std::max(longest, stops[i].size());
    stops_.push_back(std::move(stops[i]));
    original_index_.push_back(static_cast<int>(i));
  }
  pending_.reserve(2 * longest + 64);
}

bool StopMatcher::Push(std::string_view text, std::string* out) {
  if (stopped_) return true;
  if (stops_.empty()) {
    out->append(text);
    return false;
  }
  pending_.append(text);

  // The earliest stop string wins; at the same position, the first listed.
  size_t best = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t hit = pending_.find(stops_[i]);
    if (hit < best) {
      best = hit;
      matched_ = original_index_[i];
    }
  }
  if (best != std::string::npos) {
    out->append(pending_, 0, best);
    pending_.clear();
    stopped_ = true;
    return true;
  }

  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  out->append(pending_, 0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return false;
}

void StopMatcher::Flush(std::string* out) {
  if (!stopped_) out->append(pending_);
  pending_.clear();
}

void StopMatcher::Reset() {
  pending_.clear();
  stopped_ = false;
  matched_ = -1;
}

}  // namespace waste::text
