// Open sessions of one model: a conversation's KV cache and the tokens it
// holds, so a follow-up request only computes its new tokens (and a
// request without a session, asking for cache_prompt, the tokens after the
// longest prefix it shares with an idle shared session). Bounded by the
// KV caches the memory plan reserves: when full, the least recently used
// idle session is dropped; a session a running request uses is never
// dropped (a new session then waits until one is idle).
//
// Not thread-safe: owned by a model's scheduler thread.
#ifndef WASTE_DAEMON_ENGINE_SESSIONS_H_
#define WASTE_DAEMON_ENGINE_SESSIONS_H_

#include <cstdint>
#include <functional>
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
  bool busy = false;            // A running request uses it.
  bool keep = false;            // Saved to disk when dropped (keep_session).
  // Left by a request without a session id that asked for cache_prompt:
  // another such request may take its KV cache over.
  bool shared = false;
};

// How many leading tokens a and b have in common.
size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

class SessionTable {
 public:
  explicit SessionTable(size_t capacity = 4) : capacity_(std::max<size_t>(1, capacity)) {}

  // The session `id`, or nullptr. Marks it most recently used.
  Session* Find(const std::string& id);
  // Whether Create can succeed now: below capacity, or an idle session to
  // drop.
  bool CanCreate() const;
  // Creates a session whose state `make_state` builds, with `id` (a
  // restored session) or a fresh one, dropping the least recently used idle
  // session first when full (after `on_evict` has seen it). Null when every
  // session is busy (see CanCreate).
  Session* Create(const std::function<std::unique_ptr<model::SequenceState>()>& make_state,
                  const std::string& id = "");
  // The idle shared session whose tokens share the longest prefix (at
  // least `min_length` tokens, and one) with `tokens`, under a new id
  // (whoever ran it cannot continue it: it is another request's now),
  // marked most recently used; nullptr when none shares that much.
  Session* TakeOverLongestPrefix(const std::vector<int32_t>& tokens, size_t min_length);
  // Whether Create must drop a session first.
  bool full() const { return sessions_.size() >= capacity_; }
  // Called with a session about to be dropped to make room.
  void set_on_evict(std::function<void(const Session&)> on_evict) {
    on_evict_ = std::move(on_evict);
  }
  // Every session, most recently used first.
  const std::list<Session>& sessions() const { return sessions_; }
  std::list<Session>& sessions() { return sessions_; }
  void Erase(const std::string& id);
  size_t size() const { return sessions_.size(); }
  size_t capacity() const { return capacity_; }
  // Bytes of the sessions' states (KV caches).
  uint64_t bytes() const;

 private:
  size_t capacity_;
  std::string NewId();

  uint64_t next_id_ = 1;
  std::function<void(const Session&)> on_evict_;
  std::list<Session> sessions_;  // Most recently used first.
};

}  // namespace waste::engine

#endif  // WASTE_DAEMON_ENGINE_SESSIONS_H_
