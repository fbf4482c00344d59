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
  // Past the release (Export): the request passed the ownership check just before it.
  if (closed_.count(part) != 0) return Outcome::kMoved;
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

void IntentTable::ReleaseLocked(const Owner& owner, std::vector<Grant>* grants,
                                std::vector<Forwarded>* forwards) {
  TakeForwards(owner, forwards);
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
  std::vector<Forwarded> forwards;
  {
    std::lock_guard guard(mu_);
    ReleaseLocked(owner, &grants, &forwards);
  }
  Send(grants);
  Forward(forwards);
}

void IntentTable::ReleaseClient(uint64_t client) {
  std::vector<Grant> grants;
  std::vector<Forwarded> forwards;
  {
    std::lock_guard guard(mu_);
    std::vector<Owner> owners;
    for (const auto& [owner, names] : owned_) {
      if (owner.client == client) owners.push_back(owner);
    }
    for (const auto& [owner, parts] : exported_by_owner_) {
      if (owner.client == client && owned_.count(owner) == 0) owners.push_back(owner);
    }
    for (const Owner& owner : owners) ReleaseLocked(owner, &grants, &forwards);
  }
  Send(grants);
  Forward(forwards);
}

void IntentTable::TakeForwards(const Owner& owner, std::vector<Forwarded>* forwards) {
  auto o = exported_by_owner_.find(owner);
  if (o == exported_by_owner_.end()) return;
  for (const PartitionId& part : o->second) {
    auto e = exported_.find(part);
    if (e == exported_.end()) continue;
    std::erase_if(e->second.intents,
                  [&](const protocol::MovedIntent& m) { return m.owner == owner; });
    forwards->push_back(Forwarded{e->second.target, owner, part});
    if (e->second.intents.empty()) exported_.erase(e);
  }
  exported_by_owner_.erase(o);
}

void IntentTable::Forward(const std::vector<Forwarded>& forwards) {
  if (forwards.empty() || !forward_fn_) return;
  std::unordered_map<uint32_t, Released> by_node;
  for (const Forwarded& f : forwards) by_node[f.node].emplace_back(f.owner, f.part);
  for (auto& [node, released] : by_node) forward_fn_(node, std::move(released));
}

void IntentTable::Disown(const Owner& owner, const std::string& name) {
  auto o = owned_.find(owner);
  if (o == owned_.end()) return;
  auto& names = o->second;
  names.erase(std::remove(names.begin(), names.end(), name), names.end());
  if (names.empty()) owned_.erase(o);
}

void IntentTable::Export(const PartitionId& part, uint32_t target,
                         std::vector<protocol::MovedIntent>* out) {
  std::vector<Grant> moved;
  {
    std::lock_guard guard(mu_);
    closed_.insert(part);
    ExportedSet& ex = exported_[part];
    ex.target = target;
    for (auto it = locks_.begin(); it != locks_.end();) {
      Lock& lock = it->second;
      if (!(lock.part == part)) {
        ++it;
        continue;
      }
      for (const Holder& h : lock.holders) {
        ex.intents.push_back(protocol::MovedIntent{h.owner, h.priority, h.mode, lock.key});
        auto& parts = exported_by_owner_[h.owner];
        if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
        Disown(h.owner, it->first);
      }
      for (Waiter& w : lock.waiters) {
        moved.push_back(Grant{w.request, part, lock.key, std::move(w.reply)});
        Disown(w.owner, it->first);
      }
      it = locks_.erase(it);
    }
    *out = ex.intents;
    if (ex.intents.empty()) exported_.erase(part);
  }
  std::string reply;
  for (Grant& g : moved) {
    if (!g.reply.pending() || !moved_) continue;
    reply.clear();
    moved_(g.request, g.part, &reply);
    g.reply.Send(std::move(reply));
  }
}

void IntentTable::Exported(const PartitionId& part, std::vector<protocol::MovedIntent>* out) const {
  std::lock_guard guard(mu_);
  auto e = exported_.find(part);
  if (e == exported_.end()) {
    out->clear();
  } else {
    *out = e->second.intents;
  }
}

void IntentTable::Expect(const PartitionId& part) {
  std::lock_guard guard(mu_);
  early_[part].clear();
}

void IntentTable::Forget(const PartitionId& part) {
  std::lock_guard guard(mu_);
  early_.erase(part);
}

void IntentTable::Import(const PartitionId& part, const std::vector<protocol::MovedIntent>& in,
                         bool take_back) {
  std::lock_guard guard(mu_);
  closed_.erase(part);
  std::vector<protocol::MovedIntent> all;
  if (auto e = exported_.find(part); e != exported_.end()) {
    // Ended here or not, their ends are no longer passed on from here.
    for (const auto& m : e->second.intents) {
      auto o = exported_by_owner_.find(m.owner);
      if (o == exported_by_owner_.end()) continue;
      std::erase(o->second, part);
      if (o->second.empty()) exported_by_owner_.erase(o);
    }
    if (take_back) all = std::move(e->second.intents);
    exported_.erase(e);
  }
  all.insert(all.end(), in.begin(), in.end());
  std::vector<Owner> ended;
  if (auto e = early_.find(part); e != early_.end()) {
    ended = std::move(e->second);
    early_.erase(e);
  }
  for (const protocol::MovedIntent& m : all) {
    if (std::find(ended.begin(), ended.end(), m.owner) != ended.end()) continue;
    std::string name = LockName(part, m.key);
    auto [it, inserted] = locks_.try_emplace(name);
    Lock& lock = it->second;
    if (inserted) {
      lock.part = part;
      lock.key = m.key;
    }
    auto h = std::find_if(lock.holders.begin(), lock.holders.end(),
                          [&](const Holder& x) { return x.owner == m.owner; });
    if (h != lock.holders.end()) {
      h->mode = Combine(h->mode, m.mode);
      continue;
    }
    lock.holders.push_back({m.owner, m.priority, m.mode});
    owned_[m.owner].push_back(std::move(name));
  }
}

void IntentTable::ReleaseForwarded(const Owner& owner, const PartitionId& part) {
  {
    std::lock_guard guard(mu_);
    // Before the import (the end overtook the home's adoption): Import skips the owner.
    if (auto e = early_.find(part); e != early_.end()) e->second.push_back(owner);
  }
  Release(owner);
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

size_t IntentTable::exported() const {
  std::lock_guard guard(mu_);
  size_t n = 0;
  for (const auto& [part, e] : exported_) n += e.intents.size();
  return n;
}

size_t IntentTable::waiters() const {
  std::lock_guard guard(mu_);
  size_t n = 0;
  for (const auto& [name, lock] : locks_) n += lock.waiters.size();
  return n;
}

}  // namespace ramp::server
