#include "server/directory.h"

#include <sstream>

#include "store/durable/env.h"

namespace ramp::server {
namespace {

constexpr size_t kHistory = 32;

bool Terminal(MigrationPhase p) {
  return p == MigrationPhase::kDone || p == MigrationPhase::kRolledBack ||
         p == MigrationPhase::kFailed;
}

}  // namespace

Status Directory::Open(store::Env* env, const std::string& data_dir) {
  if (data_dir.empty()) return Status::OK();
  env_ = env != nullptr ? env : store::PosixEnv();
  path_ = data_dir + "/placement";
  if (!env_->Exists(path_)) return Status::OK();
  std::string text;
  RAMP_RETURN_IF_ERROR(env_->ReadFile(path_, &text));
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    n++;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string kind;
    PartitionId p;
    ls >> kind >> p.keyspace >> p.bucket;
    bool ok = !ls.fail();
    if (ok && kind == "entry") {
      Entry e;
      ls >> e.owner >> e.epoch;
      ok = !ls.fail() && e.owner < node_count();
      if (ok) entries_[p] = e;
    } else if (ok && kind == "override") {
      Override o;
      unsigned held = 0;
      ls >> held >> o.owner >> o.epoch >> o.old_epoch;
      o.held = static_cast<Held>(held);
      ok = !ls.fail() && held >= 1 && held <= 4 && o.owner < node_count();
      if (ok) overrides_[p] = o;
    } else if (ok && kind == "migration") {
      MigrationState m;
      unsigned phase = 0;
      m.part = p;
      ls >> m.source >> m.target >> phase >> m.old_epoch >> m.new_epoch >> m.started_unix_ms;
      m.phase = static_cast<MigrationPhase>(phase);
      ok = !ls.fail() && m.source < node_count() && m.target < node_count();
      if (ok) migrations_[p] = m;
    } else {
      ok = false;
    }
    if (!ok) {
      return Status::Corruption(path_ + " line " + std::to_string(n) + ": cannot parse '" + line +
                                "'");
    }
  }
  return Status::OK();
}

Status Directory::PersistLocked() const {
  if (path_.empty()) return Status::OK();
  std::ostringstream out;
  out << "# pg_ramp placement of node " << self_ << " (entries at the home, overrides, "
      << "migrations in flight)\n";
  for (const auto& [p, e] : entries_) {
    if (e.owner == HomeOf(p, homes_) && e.epoch == 1) continue;
    out << "entry " << p.keyspace << ' ' << p.bucket << ' ' << e.owner << ' ' << e.epoch << '\n';
  }
  for (const auto& [p, o] : overrides_) {
    out << "override " << p.keyspace << ' ' << p.bucket << ' ' << static_cast<unsigned>(o.held)
        << ' ' << o.owner << ' ' << o.epoch << ' ' << o.old_epoch << '\n';
  }
  for (const auto& [p, m] : migrations_) {
    out << "migration " << p.keyspace << ' ' << p.bucket << ' ' << m.source << ' ' << m.target
        << ' ' << static_cast<unsigned>(m.phase) << ' ' << m.old_epoch << ' ' << m.new_epoch << ' '
        << m.started_unix_ms << '\n';
  }
  Status st = env_->WriteFileAtomic(path_, out.str());
  return st.ok() ? st : st.Annotate("cannot write the placement file " + path_);
}

bool Directory::Names(uint32_t node, std::string* what) const {
  std::shared_lock lock(mu_);
  for (const auto& [p, e] : entries_) {
    if (e.owner == node) {
      *what = "owns partition " + p.ToString() + " (the directory of node " +
              std::to_string(self_) + " says so)";
      return true;
    }
  }
  for (const auto& [p, m] : migrations_) {
    if (m.source == node || m.target == node) {
      *what = "takes part in the migration of partition " + p.ToString();
      return true;
    }
  }
  return false;
}

bool Directory::OwnsLocked(const PartitionId& p, uint32_t* hint, uint64_t* epoch) const {
  const uint32_t home = HomeOf(p, homes_);
  if (!overrides_.empty()) {
    if (auto it = overrides_.find(p); it != overrides_.end()) {
      const Override& o = it->second;
      switch (o.held) {
        case Held::kAdopted:
          *hint = self_;
          *epoch = o.epoch;
          return true;
        case Held::kReleased:
        case Held::kGone:
          *hint = o.owner;
          *epoch = o.epoch;
          return false;
        case Held::kIncoming:
          break;  // the entry (at the home) or the home says who owns it
      }
    }
  }
  if (home == self_) {
    if (auto it = entries_.find(p); it != entries_.end()) {
      *hint = it->second.owner;
      *epoch = it->second.epoch;
      return it->second.owner == self_ &&
             !(overrides_.count(p) && overrides_.at(p).held == Held::kIncoming);
    }
    *hint = self_;
    *epoch = 1;
    return !overrides_.count(p);
  }
  *hint = home;
  *epoch = 0;
  return false;
}

bool Directory::Owns(const PartitionId& p, uint32_t* hint, uint64_t* epoch) const {
  std::shared_lock lock(mu_);
  return OwnsLocked(p, hint, epoch);
}

bool Directory::ServesPagesAt(const PartitionId& p, uint64_t epoch) const {
  std::shared_lock lock(mu_);
  if (auto it = overrides_.find(p); it != overrides_.end() && it->second.held == Held::kReleased) {
    return it->second.old_epoch == epoch;
  }
  uint32_t hint = 0;
  uint64_t e = 0;
  return OwnsLocked(p, &hint, &e) && e == epoch;
}

protocol::Placement Directory::Lookup(const PartitionId& p, uint64_t sharer) {
  std::unique_lock lock(mu_);
  auto [it, inserted] = entries_.try_emplace(p);
  if (inserted) it->second.owner = HomeOf(p, homes_);
  it->second.sharers.insert(sharer);
  return protocol::Placement{it->second.owner, it->second.epoch};
}

protocol::Placement Directory::EntryOf(const PartitionId& p) const {
  std::shared_lock lock(mu_);
  auto it = entries_.find(p);
  if (it == entries_.end()) return protocol::Placement{HomeOf(p, homes_), 1};
  return protocol::Placement{it->second.owner, it->second.epoch};
}

void Directory::NoteRoute(uint64_t sharer, std::shared_ptr<const DeferredReply::PostFn> post,
                          uint64_t session) {
  std::lock_guard lock(routes_mu_);
  Route& r = routes_[sharer];
  if (r.session == session && r.post == post) return;
  r.post = std::move(post);
  r.session = session;
}

size_t Directory::PushPlacement(const PartitionId& p, uint64_t clock) {
  const std::vector<uint64_t> sharers = Sharers(p);
  if (sharers.empty()) return 0;
  protocol::PlacementPush push;
  push.entries.emplace_back(p, EntryOf(p));
  protocol::Header h;
  h.op = static_cast<uint16_t>(protocol::Op::kPlacement) | protocol::kReplyBit;
  h.count = 1;
  h.clock = clock;
  std::string msg;
  protocol::EncodeHeader(h, &msg);
  protocol::Encode(push, &msg);
  size_t sent = 0;
  std::lock_guard lock(routes_mu_);
  for (uint64_t c : sharers) {
    auto it = routes_.find(c);
    if (it == routes_.end() || it->second.post == nullptr) continue;
    (*it->second.post)(it->second.session, msg);  // into the worker's mailbox: never blocks
    sent++;
  }
  return sent;
}

std::vector<uint64_t> Directory::Sharers(const PartitionId& p) const {
  std::shared_lock lock(mu_);
  auto it = entries_.find(p);
  if (it == entries_.end()) return {};
  return {it->second.sharers.begin(), it->second.sharers.end()};
}

Status Directory::BeginMigration(const MigrationState& m) {
  std::unique_lock lock(mu_);
  if (auto it = migrations_.find(m.part); it != migrations_.end()) {
    return Status::Conflict("partition " + m.part.ToString() + " is already migrating (node " +
                            std::to_string(it->second.source) + " to node " +
                            std::to_string(it->second.target) + ", phase " +
                            protocol::MigrationPhaseName(it->second.phase) + ")");
  }
  migrations_[m.part] = m;
  Status st = PersistLocked();
  if (!st.ok()) migrations_.erase(m.part);
  return st;
}

Status Directory::SetPhase(const PartitionId& p, MigrationPhase phase, const std::string& error,
                           uint64_t rolled_to_epoch) {
  std::unique_lock lock(mu_);
  auto it = migrations_.find(p);
  if (it == migrations_.end()) return Status::NotFound("no migration of " + p.ToString());
  MigrationState& m = it->second;
  m.phase = phase;
  if (!error.empty()) m.error = error;
  auto [eit, fresh] = entries_.try_emplace(p);
  Entry& e = eit->second;
  if (fresh) e.owner = HomeOf(p, homes_);
  if (phase == MigrationPhase::kCommitted) {
    e.owner = m.target;
    e.epoch = m.new_epoch;
  } else if (phase == MigrationPhase::kRolledBack && rolled_to_epoch != 0) {
    e.owner = m.source;
    e.epoch = rolled_to_epoch;
  }
  if (Terminal(phase)) {
    history_.push_back(m);
    if (history_.size() > kHistory) history_.erase(history_.begin());
    migrations_.erase(it);
  }
  return PersistLocked();
}

void Directory::SetProgress(const PartitionId& p, uint64_t copied, uint64_t total) {
  std::unique_lock lock(mu_);
  if (auto it = migrations_.find(p); it != migrations_.end()) {
    it->second.bytes_copied = copied;
    it->second.bytes_total = total;
  }
}

bool Directory::Migrating(const PartitionId& p) const {
  std::shared_lock lock(mu_);
  return migrations_.count(p) != 0;
}

bool Directory::FindMigration(const PartitionId& p, MigrationState* out) const {
  std::shared_lock lock(mu_);
  auto it = migrations_.find(p);
  if (it == migrations_.end()) return false;
  *out = it->second;
  return true;
}

std::vector<MigrationState> Directory::InFlight() const {
  std::shared_lock lock(mu_);
  std::vector<MigrationState> out;
  for (const auto& [p, m] : migrations_) out.push_back(m);
  return out;
}

std::vector<MigrationState> Directory::Migrations() const {
  std::shared_lock lock(mu_);
  std::vector<MigrationState> out;
  for (const auto& [p, m] : migrations_) out.push_back(m);
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) out.push_back(*it);
  return out;
}

Status Directory::Adopt(const PartitionId& p, uint64_t epoch) {
  std::unique_lock lock(mu_);
  overrides_[p] = Override{Held::kAdopted, self_, epoch, 0};
  return PersistLocked();
}

Status Directory::Release(const PartitionId& p, uint32_t new_owner, uint64_t new_epoch,
                          uint64_t old_epoch) {
  std::unique_lock lock(mu_);
  overrides_[p] = Override{Held::kReleased, new_owner, new_epoch, old_epoch};
  return PersistLocked();
}

Status Directory::Incoming(const PartitionId& p, uint64_t epoch) {
  std::unique_lock lock(mu_);
  overrides_[p] = Override{Held::kIncoming, self_, epoch, 0};
  return PersistLocked();
}

Status Directory::Gone(const PartitionId& p) {
  std::unique_lock lock(mu_);
  auto it = overrides_.find(p);
  if (it == overrides_.end()) return Status::OK();
  if (it->second.held == Held::kIncoming) {
    overrides_.erase(it);
  } else if (it->second.held == Held::kReleased) {
    it->second.held = Held::kGone;
  }
  return PersistLocked();
}

Directory::CopyFate Directory::FateOf(const PartitionId& p) const {
  std::shared_lock lock(mu_);
  if (auto it = overrides_.find(p); it != overrides_.end()) {
    switch (it->second.held) {
      case Held::kAdopted:
        return CopyFate::kServe;
      case Held::kReleased:
      case Held::kIncoming:
        return CopyFate::kKeep;
      case Held::kGone:
        return CopyFate::kDrop;
    }
  }
  uint32_t hint = 0;
  uint64_t epoch = 0;
  return OwnsLocked(p, &hint, &epoch) ? CopyFate::kServe : CopyFate::kKeep;
}

}  // namespace ramp::server
