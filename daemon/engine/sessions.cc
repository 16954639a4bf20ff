#include "daemon/engine/sessions.h"

#include <random>

#include "absl/strings/str_format.h"

namespace waste::engine {

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
  // Unguessable enough that one client does not stumble into another's.
  static std::mt19937_64 rng{std::random_device{}()};
  Session session;
  session.id = id.empty() ? absl::StrFormat("s%d-%016x", next_id_++, rng()) : id;
  session.state = make_state();
  sessions_.push_front(std::move(session));
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
