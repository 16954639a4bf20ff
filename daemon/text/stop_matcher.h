// Stop sequences on streamed text: the daemon feeds decoded text chunk by
// chunk; the matcher passes through what cannot be part of a stop string and
// holds back a tail that might be the start of one, until the next chunk
// decides. When a stop string appears (possibly spread over many chunks),
// the text before it is released and the stream ends; the stop string
// itself is not emitted.
//
// Not thread-safe: one per generation stream. Allocates only at
// construction, and when a chunk is longer than any seen before.
#ifndef WASTE_DAEMON_TEXT_STOP_MATCHER_H_
#define WASTE_DAEMON_TEXT_STOP_MATCHER_H_

#include <string>
#include <string_view>
#include <vector>

namespace waste::text {

class StopMatcher {
 public:
  // Empty stop strings are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  // Feeds `text`; appends the text that is now safe to emit to *out. Returns
  // true once a stop string has been found (then *out ends right before it,
  // and later calls emit nothing and return true).
  bool Push(std::string_view text, std::string* out);

  // End of stream without a stop: appends the held-back tail.
  void Flush(std::string* out);

  bool stopped() const { return stopped_; }
  // Index into the constructor's list of the stop string found, or -1.
  int matched_index() const { return matched_; }
  size_t held_bytes() const { return pending_.size(); }
  void Reset();

 private:
  std::vector<std::string> stops_;
  std::vector<int> original_index_;
  std::string pending_;
  bool stopped_ = false;
  int matched_ = -1;
};

}  // namespace waste::text

#endif  // WASTE_DAEMON_TEXT_STOP_MATCHER_H_
