#include "daemon/engine/sessions.h"

#include <random>

#include "absl/strings/str_format.h"

namespace waste::engine {

size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

Session* SessionTable::Find(const std::string& id) {
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->id == id) {
      sessions_.splice(sessions_.begin(), sessions_, it);
      return &sessions_.front();
    }
  }
  return nullptr;
}

bool SessionTable::CanCreate() const {
  if (sessions_.size() < capacity_) return true;
  for (const Session& s : sessions_) {
    if (!s.busy) return true;
  }
  return false;
}

Session* SessionTable::Create(
    const std::function<std::unique_ptr<model::SequenceState>()>& make_state,
    const std::string& id) {
  if (sessions_.size() >= capacity_) {
    // Drop the least recently used idle session (freeing its KV cache before
    // the new one is allocated, so the budget is never exceeded).
    auto victim = sessions_.end();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
      if (!it->busy) victim = it;
    }
    if (victim == sessions_.end()) return nullptr;
    if (on_evict_) on_evict_(*victim);
    sessions_.erase(victim);
  }
  Session session;
  session.id = id.empty() ? NewId() : id;
  session.state = make_state();
  sessions_.push_front(std::move(session));
  return &sessions_.front();
}

std::string SessionTable::NewId() {
  // Unguessable enough that one client does not stumble into another's.
  static std::mt19937_64 rng{std::random_device{}()};
  return absl::StrFormat("s%d-%016x", next_id_++, rng());
}

Session* SessionTable::TakeOverLongestPrefix(const std::vector<int32_t>& tokens,
                                             size_t min_length) {
  auto best = sessions_.end();
  size_t best_length = std::max<size_t>(min_length, 1) - 1;
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (it->busy || !it->shared) continue;
    const size_t length = CommonPrefix(it->tokens, tokens);
    if (length > best_length) {
      best = it;
      best_length = length;
    }
  }
  if (best == sessions_.end()) return nullptr;
  best->id = NewId();
  sessions_.splice(sessions_.begin(), sessions_, best);
  return &sessions_.front();
}

void SessionTable::Erase(const std::string& id) {
  sessions_.remove_if([&](const Session& s) { return s.id == id && !s.busy; });
}

uint64_t SessionTable::bytes() const {
  uint64_t total = 0;
  for (const Session& s : sessions_) total += s.state->bytes();
  return total;
}

}  // namespace waste::engine
