// Open sessions of one model: a conversation's KV cache and the tokens it
// holds, so a follow-up request only computes its new tokens. Bounded: when
// full, the least recently used session is dropped.
//
// Not thread-safe: owned by a LoadedModel under its run mutex.
#ifndef WASTE_DAEMON_ENGINE_SESSIONS_H_
#define WASTE_DAEMON_ENGINE_SESSIONS_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "daemon/model/forward.h"

namespace waste::engine {

struct Session {
  std::string id;
  std::unique_ptr<model::SequenceState> state;
  std::vector<int32_t> tokens;  // Tokens whose K/V the state holds, in order.
};

class SessionTable {
 public:
  explicit SessionTable(size_t capacity = 4) : capacity_(capacity) {}

  // The session `id`, or nullptr. Marks it most recently used.
  Session* Find(const std::string& id);
  // Creates a session with a fresh id (dropping the least recently used one
  // when full) whose state `make_state` builds.
  Session* Create(const std::function<std::unique_ptr<model::SequenceState>()>& make_state);
  void Erase(const std::string& id);
  size_t size() const { return sessions_.size(); }

 private:
  size_t capacity_;
  uint64_t next_id_ = 1;
  std::list<Session> sessions_;  // Most recently used first.
};

}  // namespace waste::engine

#endif  // WASTE_DAEMON_ENGINE_SESSIONS_H_
