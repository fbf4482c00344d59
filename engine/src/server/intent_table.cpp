#include "server/intent_table.h"

#include <algorithm>
#include <cstring>

namespace ramp::server {

namespace {

bool IsGroup(uint8_t mode) {
  return mode >= protocol::kIntentGroupBase;
}

// The stronger of two modes one owner holds; share + no-key-exclusive make exclusive (as a
// PostgreSQL tuple locked both ways). A group with anything but itself or key-share is
// exclusive too (it conflicts with both groups' writers).
uint8_t Combine(uint8_t a, uint8_t b) {
  if (a == b) return a;
  if (IsGroup(a) || IsGroup(b)) {
    if (a == protocol::kIntentKeyShare) return b;
    if (b == protocol::kIntentKeyShare) return a;
    return protocol::kIntentExclusive;
  }
  if ((a == protocol::kIntentShare && b == protocol::kIntentNoKeyExclusive) ||
      (b == protocol::kIntentShare && a == protocol::kIntentNoKeyExclusive)) {
    return protocol::kIntentExclusive;
  }
  return std::max(a, b);
}

bool Covers(uint8_t held, uint8_t wanted) {
  if (IsGroup(held) || IsGroup(wanted)) {
    return held == wanted || held == protocol::kIntentExclusive ||
           wanted == protocol::kIntentKeyShare;
  }
  return held == wanted || held == protocol::kIntentExclusive ||
         (wanted == protocol::kIntentKeyShare) ||
         (held == protocol::kIntentNoKeyExclusive && wanted != protocol::kIntentShare &&
          wanted != protocol::kIntentExclusive);
}

}  // namespace

// PostgreSQL's row-lock conflict table (README of heapam: tuple lock modes), and groups
// (kIntentGroupBase): only the same group, and key-share, go with a group.
bool IntentTable::Conflicts(uint8_t a, uint8_t b) {
  using namespace protocol;
  if (IsGroup(a) || IsGroup(b)) {
    return a != b && a != kIntentKeyShare && b != kIntentKeyShare;
  }
  if (a == kIntentExclusive || b == kIntentExclusive) return true;
  if (a == kIntentKeyShare || b == kIntentKeyShare) return false;
  // Share and no-key-exclusive: only share with share goes together.
  return !(a == kIntentShare && b == kIntentShare);
}

std::string IntentTable::LockName(const PartitionId& part, std::string_view key) {
  std::string name(12 + key.size(), '\0');
  std::memcpy(name.data(), &part.keyspace, 8);
  std::memcpy(name.data() + 8, &part.bucket, 4);
  std::memcpy(name.data() + 12, key.data(), key.size());
  return name;
}

IntentTable::Outcome IntentTable::Acquire(const Owner& owner, uint64_t priority,
                                          const PartitionId& part, std::string_view key,
                                          uint8_t mode, bool wait, const protocol::Header& request,
                                          DeferredReply reply,
                                          std::vector<protocol::IntentHolder>* holders) {
  holders->clear();
  std::string name = LockName(part, key);
  std::lock_guard guard(mu_);
  auto [it, inserted] = locks_.try_emplace(name);
  Lock& lock = it->second;
  if (inserted) {
    lock.part = part;
    lock.key.assign(key);
  }
  Holder* mine = nullptr;
  for (Holder& h : lock.holders) {
    if (h.owner == owner) mine = &h;
  }
  if (mine != nullptr && Covers(mine->mode, mode)) return Outcome::kGranted;
  // A request queued already (a re-send after a wait slice) keeps its place.
  for (Waiter& w : lock.waiters) {
    if (!(w.owner == owner)) continue;
    w.mode = Combine(w.mode, mode);
    if (wait) {
      w.request = request;
      w.reply = std::move(reply);
    }
    for (const Holder& h : lock.holders) {
      if (!(h.owner == owner)) holders->push_back({h.owner, h.priority});
    }
    return wait ? Outcome::kQueued : Outcome::kHeld;
  }
  const uint8_t wanted = mine != nullptr ? Combine(mine->mode, mode) : mode;
  for (const Holder& h : lock.holders) {
    if (!(h.owner == owner) && Conflicts(h.mode, wanted)) holders->push_back({h.owner, h.priority});
  }
  // First come, first served: a request behind queued ones waits for them too, so that a
  // stream of share requests cannot starve an exclusive one. An upgrade of a holding does
  // not queue behind requests that wait for that holding.
  if (holders->empty() && (lock.waiters.empty() || mine != nullptr)) {
    if (mine != nullptr) {
      mine->mode = wanted;
    } else {
      lock.holders.push_back({owner, priority, mode});
      owned_[owner].push_back(std::move(name));
    }
    return Outcome::kGranted;
  }
  for (const Waiter& w : lock.waiters) {
    if (Conflicts(w.mode, wanted)) holders->push_back({w.owner, w.priority});
  }
  if (holders->empty()) {
    // Only compatible requests queued ahead: they are held up by a holder, and so are we.
    for (const Holder& h : lock.holders) {
      if (!(h.owner == owner)) holders->push_back({h.owner, h.priority});
    }
  }
  if (!wait) {
    if (inserted) locks_.erase(it);
    return Outcome::kHeld;
  }
  lock.waiters.push_back(Waiter{owner, priority, wanted, request, std::move(reply)});
  if (mine == nullptr) owned_[owner].push_back(std::move(name));
  return Outcome::kQueued;
}

void IntentTable::GrantWaiters(Lock& lock, std::vector<Grant>* grants) {
  while (!lock.waiters.empty()) {
    Waiter& w = lock.waiters.front();
    Holder* mine = nullptr;
    bool blocked = false;
    for (Holder& h : lock.holders) {
      if (h.owner == w.owner) {
        mine = &h;
      } else if (Conflicts(h.mode, w.mode)) {
        blocked = true;
      }
    }
    if (blocked) return;
    if (mine != nullptr) {
      mine->mode = Combine(mine->mode, w.mode);
    } else {
      lock.holders.push_back({w.owner, w.priority, w.mode});
    }
    grants->push_back(Grant{w.request, lock.part, lock.key, std::move(w.reply)});
    lock.waiters.pop_front();
  }
}

void IntentTable::Withdraw(const Owner& owner, const PartitionId& part, std::string_view key) {
  std::vector<Grant> grants;
  {
    std::lock_guard guard(mu_);
    auto it = locks_.find(LockName(part, key));
    if (it == locks_.end()) return;
    Lock& lock = it->second;
    auto& q = lock.waiters;
    const size_t before = q.size();
    q.erase(std::remove_if(q.begin(), q.end(), [&](const Waiter& w) { return w.owner == owner; }),
            q.end());
    if (q.size() == before) return;
    // Requests queued behind the withdrawn one may fit now.
    GrantWaiters(lock, &grants);
    const bool holds = std::any_of(lock.holders.begin(), lock.holders.end(),
                                   [&](const Holder& h) { return h.owner == owner; });
    if (!holds) {
      auto o = owned_.find(owner);
      if (o != owned_.end()) {
        auto& names = o->second;
        names.erase(std::remove(names.begin(), names.end(), it->first), names.end());
        if (names.empty()) owned_.erase(o);
      }
    }
    if (lock.holders.empty() && lock.waiters.empty()) locks_.erase(it);
  }
  Send(grants);
}

void IntentTable::ReleaseLocked(const Owner& owner, std::vector<Grant>* grants) {
  auto o = owned_.find(owner);
  if (o == owned_.end()) return;
  std::vector<std::string> names = std::move(o->second);
  owned_.erase(o);
  for (const std::string& name : names) {
    auto it = locks_.find(name);
    if (it == locks_.end()) continue;
    Lock& lock = it->second;
    std::erase_if(lock.holders, [&](const Holder& h) { return h.owner == owner; });
    std::erase_if(lock.waiters, [&](const Waiter& w) { return w.owner == owner; });
    GrantWaiters(lock, grants);
    if (lock.holders.empty() && lock.waiters.empty()) locks_.erase(it);
  }
}

void IntentTable::Release(const Owner& owner) {
  std::vector<Grant> grants;
  {
    std::lock_guard guard(mu_);
    ReleaseLocked(owner, &grants);
  }
  Send(grants);
}

void IntentTable::ReleaseClient(uint64_t client) {
  std::vector<Grant> grants;
  {
    std::lock_guard guard(mu_);
    std::vector<Owner> owners;
    for (const auto& [owner, names] : owned_) {
      if (owner.client == client) owners.push_back(owner);
    }
    for (const Owner& owner : owners) ReleaseLocked(owner, &grants);
  }
  Send(grants);
}

void IntentTable::Send(std::vector<Grant>& grants) {
  // Outside the mutex: the grant reads the store and posts to a worker.
  std::string reply;
  for (Grant& g : grants) {
    if (!g.reply.pending()) continue;  // its client gave up on that request (re-sends)
    reply.clear();
    grant_(g.request, g.part, g.key, &reply);
    g.reply.Send(std::move(reply));
  }
}

void IntentTable::WaitsFor(const Owner& owner, std::vector<protocol::IntentHolder>* out) const {
  out->clear();
  std::lock_guard guard(mu_);
  auto o = owned_.find(owner);
  if (o == owned_.end()) return;
  for (const std::string& name : o->second) {
    auto it = locks_.find(name);
    if (it == locks_.end()) continue;
    const Lock& lock = it->second;
    for (size_t i = 0; i < lock.waiters.size(); i++) {
      const Waiter& w = lock.waiters[i];
      if (!(w.owner == owner)) continue;
      for (const Holder& h : lock.holders) {
        if (!(h.owner == owner) && Conflicts(h.mode, w.mode)) out->push_back({h.owner, h.priority});
      }
      for (size_t j = 0; j < i; j++) {
        const Waiter& ahead = lock.waiters[j];
        if (Conflicts(ahead.mode, w.mode)) out->push_back({ahead.owner, ahead.priority});
      }
    }
  }
}

size_t IntentTable::locked_keys() const {
  std::lock_guard guard(mu_);
  return locks_.size();
}

size_t IntentTable::waiters() const {
  std::lock_guard guard(mu_);
  size_t n = 0;
  for (const auto& [name, lock] : locks_) n += lock.waiters.size();
  return n;
}

}  // namespace ramp::server
