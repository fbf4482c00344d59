#include "ramp/transport/memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <list>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "core/region.h"
#include "ramp/log.h"
#include "ramp/transport/auth.h"

namespace ramp::transport {
namespace {

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

// One allocation: a sealed memfd mapped shared. It is owned through shared_ptr so that a
// pinned access (Resolve with pin) keeps the mapping valid after Free.
struct Mapping {
  Segment segment;
  ~Mapping() {
    if (segment.base != nullptr) munmap(segment.base, segment.length);
    if (segment.fd >= 0) close(segment.fd);
  }
};

struct Piece {
  uint8_t* data;
  uint64_t length;
  uint64_t region_offset;  // where the piece starts in the registration's address space
  uint64_t segment_id;
  uint64_t segment_offset;
};

struct Registration {
  RemoteRegion handle;
  std::vector<Piece> pieces;
  // The allocations the pieces live in; a pin on the registration pins them.
  std::vector<std::shared_ptr<Mapping>> mappings;
};

std::string RegionName(uint64_t id) {
  return "region " + std::to_string(id);
}

// Identity of a cached registration: the buffer list and the access asked for.
struct CacheKey {
  std::vector<std::pair<uintptr_t, size_t>> buffers;
  uint32_t access;
  bool operator==(const CacheKey&) const = default;
};

struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const {
    uint64_t h = 1469598103934665603ull ^ k.access;
    for (const auto& [p, n] : k.buffers) {
      h = (h ^ p) * 1099511628211ull;
      h = (h ^ n) * 1099511628211ull;
    }
    return static_cast<size_t>(h);
  }
};

struct CacheEntry {
  CacheKey key;
  RemoteRegion region;
};

}  // namespace

struct Memory::State {
  Options options;

  // Tables; Resolve (the hot path of providers serving peers) takes the lock shared.
  mutable std::shared_mutex mu;
  std::map<uintptr_t, std::shared_ptr<Mapping>> by_base;
  std::unordered_map<uint64_t, std::shared_ptr<Mapping>> by_segment;
  std::unordered_map<uint64_t, std::shared_ptr<const Registration>> registrations;
  uint64_t next_segment_id = 1;
  uint64_t next_registration_id = 1;

  // Registration cache, most recently used first. Lock order: cache_mu before mu.
  mutable std::mutex cache_mu;
  std::list<CacheEntry> lru;
  std::unordered_map<CacheKey, std::list<CacheEntry>::iterator, CacheKeyHash> cache_index;
  CacheStats cache_stats;

  // The allocation holding [p, p+len), or null. Caller holds mu.
  const std::shared_ptr<Mapping>* FindMapping(const void* ptr, size_t len) const {
    uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    auto it = by_base.upper_bound(p);
    if (it == by_base.begin()) return nullptr;
    --it;
    const Segment& s = it->second->segment;
    uintptr_t base = reinterpret_cast<uintptr_t>(s.base);
    if (p < base || len > s.length || p - base > s.length - len) return nullptr;
    return &it->second;
  }

  Status Lookup(const RemoteRegion& handle, uint64_t offset, uint64_t len, uint32_t access,
                std::shared_ptr<const Registration>* out) const {
    auto it = registrations.find(handle.id);
    if (it == registrations.end()) {
      return Status::NotFound(RegionName(handle.id) + " is not registered");
    }
    RAMP_RETURN_IF_ERROR(
        detail::CheckRegionAccess(it->second->handle, handle, offset, len, access));
    *out = it->second;
    return Status::OK();
  }
};

namespace {

// The spans of [offset, offset+len) of a registration (bounds already checked).
void CollectSpans(const Registration& r, uint64_t offset, uint64_t len, std::vector<Span>* out) {
  out->clear();
  if (len == 0) return;
  const auto& pieces = r.pieces;
  size_t i = 0;
  if (pieces.size() > 1) {
    // The last piece starting at or before offset.
    auto it = std::upper_bound(pieces.begin(), pieces.end(), offset,
                               [](uint64_t off, const Piece& p) { return off < p.region_offset; });
    i = static_cast<size_t>(it - pieces.begin()) - 1;
  }
  uint64_t within = offset - pieces[i].region_offset;
  while (len > 0) {
    const Piece& p = pieces[i];
    uint64_t take = std::min(len, p.length - within);
    out->push_back(Span{p.data + within, take});
    len -= take;
    within = 0;
    i++;
  }
}

}  // namespace

Memory::Memory(const Options& options) : state_(std::make_unique<State>()) {
  state_->options = options;
}

Memory::~Memory() = default;

std::shared_ptr<Memory> Memory::Create(const Options& options) {
  return std::shared_ptr<Memory>(new Memory(options));
}

Status Memory::Allocate(size_t len, uint32_t max_access, uint8_t** out) {
  if (len == 0) return Status::InvalidArgument("Allocate: zero bytes");
  if (max_access == 0 || (max_access & ~uint32_t{kAccessReadWrite}) != 0) {
    return Status::InvalidArgument("Allocate: invalid max_access " + std::to_string(max_access));
  }
  const size_t page = PageSize();
  if (len > (size_t{1} << 46)) return Status::InvalidArgument("Allocate: size too large");
  const size_t rounded = (len + page - 1) & ~(page - 1);

  // memfd so that the shm provider can pass the memory to a peer; sealed against shrinking
  // (a peer truncating it would turn our accesses into SIGBUS) and against new seals.
  int fd = memfd_create("ramp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return Status::FromErrno("memfd_create", errno);
  auto mapping = std::make_shared<Mapping>();
  mapping->segment.fd = fd;
  if (ftruncate(fd, static_cast<off_t>(rounded)) != 0) {
    return Status::FromErrno("ftruncate memfd to " + std::to_string(rounded) + " bytes", errno);
  }
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Status::FromErrno("sealing memfd", errno);
  }
  void* base = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    int err = errno;
    if (err == ENOMEM) {
      return Status::NoSpace("mmap of " + std::to_string(rounded) + " bytes: out of memory");
    }
    return Status::FromErrno("mmap memfd", err);
  }
  mapping->segment.base = static_cast<uint8_t*>(base);
  mapping->segment.length = rounded;
  mapping->segment.max_access = max_access;

  std::unique_lock lock(state_->mu);
  mapping->segment.id = state_->next_segment_id++;
  state_->by_base[reinterpret_cast<uintptr_t>(base)] = mapping;
  state_->by_segment[mapping->segment.id] = mapping;
  *out = mapping->segment.base;
  return Status::OK();
}

Status Memory::Free(uint8_t* base) {
  std::shared_ptr<Mapping> victim;  // released after the lock: munmap outside it
  std::vector<std::shared_ptr<const Registration>> dropped;
  {
    std::unique_lock lock(state_->mu);
    auto it = state_->by_base.find(reinterpret_cast<uintptr_t>(base));
    if (it == state_->by_base.end()) {
      return Status::InvalidArgument("Free: pointer is not the base of an allocation");
    }
    victim = it->second;
    state_->by_base.erase(it);
    state_->by_segment.erase(victim->segment.id);
    for (auto r = state_->registrations.begin(); r != state_->registrations.end();) {
      bool inside = false;
      for (const Piece& p : r->second->pieces) inside |= p.segment_id == victim->segment.id;
      if (inside) {
        dropped.push_back(r->second);
        r = state_->registrations.erase(r);
      } else {
        ++r;
      }
    }
  }
  return Status::OK();
}

Status Memory::Register(void* ptr, size_t len, uint32_t access, RemoteRegion* out) {
  iovec iov{ptr, len};
  return RegisterV(&iov, 1, access, out);
}

Status Memory::RegisterV(const iovec* iov, int iovcnt, uint32_t access, RemoteRegion* out) {
  if (iovcnt <= 0 || iov == nullptr) return Status::InvalidArgument("Register: no buffers");
  if (access == 0 || (access & ~uint32_t{kAccessReadWrite}) != 0) {
    return Status::InvalidArgument("Register: invalid access bits " + std::to_string(access));
  }
  auto reg = std::make_shared<Registration>();
  reg->pieces.reserve(static_cast<size_t>(iovcnt));
  // Drawn before taking the lock: getrandom is a system call.
  reg->handle.key = RandomU64();
  reg->handle.access = access;

  std::unique_lock lock(state_->mu);
  uint64_t total = 0;
  for (int i = 0; i < iovcnt; i++) {
    const std::string which = "Register: buffer " + std::to_string(i);
    if (iov[i].iov_len == 0) return Status::InvalidArgument(which + " is empty");
    const std::shared_ptr<Mapping>* m = state_->FindMapping(iov[i].iov_base, iov[i].iov_len);
    if (m == nullptr) {
      return Status::InvalidArgument(which + " (" + std::to_string(iov[i].iov_len) +
                                     " bytes) does not lie inside one Memory allocation");
    }
    const Segment& seg = (*m)->segment;
    if ((access & ~seg.max_access) != 0) {
      return Status::PermissionDenied(which + ": access " + std::to_string(access) +
                                      " exceeds the allocation's max_access " +
                                      std::to_string(seg.max_access));
    }
    auto* data = static_cast<uint8_t*>(iov[i].iov_base);
    reg->pieces.push_back(
        Piece{data, iov[i].iov_len, total, seg.id, static_cast<uint64_t>(data - seg.base)});
    if (std::find(reg->mappings.begin(), reg->mappings.end(), *m) == reg->mappings.end()) {
      reg->mappings.push_back(*m);
    }
    total += iov[i].iov_len;
  }
  reg->handle.id = state_->next_registration_id++;
  reg->handle.length = total;
  *out = reg->handle;
  state_->registrations[reg->handle.id] = std::move(reg);
  return Status::OK();
}

Status Memory::Deregister(uint64_t id) {
  std::shared_ptr<const Registration> dropped;  // destroyed after the lock
  std::unique_lock lock(state_->mu);
  auto it = state_->registrations.find(id);
  if (it == state_->registrations.end()) {
    return Status::NotFound(RegionName(id) + " is not registered");
  }
  dropped = std::move(it->second);
  state_->registrations.erase(it);
  return Status::OK();
}

Status Memory::RegisterCached(const iovec* iov, int iovcnt, uint32_t access, RemoteRegion* out) {
  if (iovcnt <= 0 || iov == nullptr) return Status::InvalidArgument("Register: no buffers");
  CacheKey key;
  key.access = access;
  key.buffers.reserve(static_cast<size_t>(iovcnt));
  for (int i = 0; i < iovcnt; i++) {
    key.buffers.emplace_back(reinterpret_cast<uintptr_t>(iov[i].iov_base), iov[i].iov_len);
  }
  State& st = *state_;
  std::lock_guard<std::mutex> cache_lock(st.cache_mu);
  auto hit = st.cache_index.find(key);
  if (hit != st.cache_index.end()) {
    const RemoteRegion region = hit->second->region;
    bool live = false;
    {
      std::shared_lock lock(st.mu);
      auto r = st.registrations.find(region.id);
      live = r != st.registrations.end() && r->second->handle.key == region.key;
    }
    if (live) {
      st.lru.splice(st.lru.begin(), st.lru, hit->second);
      st.cache_stats.hits++;
      *out = region;
      return Status::OK();
    }
    // Deregistered (or freed) behind the cache's back: forget it and register anew.
    st.lru.erase(hit->second);
    st.cache_index.erase(hit);
  }
  st.cache_stats.misses++;
  RemoteRegion region;
  RAMP_RETURN_IF_ERROR(RegisterV(iov, iovcnt, access, &region));
  *out = region;
  if (st.options.registration_cache_entries == 0) return Status::OK();  // caching disabled
  st.lru.push_front(CacheEntry{key, region});
  st.cache_index.emplace(std::move(key), st.lru.begin());
  while (st.lru.size() > st.options.registration_cache_entries) {
    CacheEntry& victim = st.lru.back();
    Status s = Deregister(victim.region.id);
    if (!s.ok() && !s.Is(Status::Code::kNotFound)) {
      RAMP_WARN("registration cache: evicting %s: %s", RegionName(victim.region.id).c_str(),
                s.ToString().c_str());
    }
    st.cache_index.erase(victim.key);
    st.lru.pop_back();
    st.cache_stats.evictions++;
  }
  return Status::OK();
}

Memory::CacheStats Memory::cache_stats() const {
  std::lock_guard<std::mutex> lock(state_->cache_mu);
  return state_->cache_stats;
}

Status Memory::Resolve(const RemoteRegion& handle, uint64_t offset, uint64_t len, uint32_t access,
                       std::vector<Span>* out) const {
  std::shared_lock lock(state_->mu);
  std::shared_ptr<const Registration> reg;
  RAMP_RETURN_IF_ERROR(state_->Lookup(handle, offset, len, access, &reg));
  CollectSpans(*reg, offset, len, out);
  return Status::OK();
}

Status Memory::Resolve(const RemoteRegion& handle, uint64_t offset, uint64_t len, uint32_t access,
                       std::vector<Span>* out, std::shared_ptr<const void>* pin) const {
  std::shared_ptr<const Registration> reg;
  {
    std::shared_lock lock(state_->mu);
    RAMP_RETURN_IF_ERROR(state_->Lookup(handle, offset, len, access, &reg));
  }
  CollectSpans(*reg, offset, len, out);
  *pin = std::move(reg);
  return Status::OK();
}

Status Memory::Describe(uint64_t id, RemoteRegion* handle,
                        std::vector<SegmentPiece>* pieces) const {
  std::shared_lock lock(state_->mu);
  auto it = state_->registrations.find(id);
  if (it == state_->registrations.end()) {
    return Status::NotFound(RegionName(id) + " is not registered");
  }
  *handle = it->second->handle;
  pieces->clear();
  for (const Piece& p : it->second->pieces) {
    pieces->push_back(SegmentPiece{p.segment_id, p.segment_offset, p.length});
  }
  return Status::OK();
}

Status Memory::GetSegment(uint64_t segment_id, Segment* out) const {
  std::shared_ptr<const void> pin;
  return GetSegment(segment_id, out, &pin);
}

Status Memory::GetSegment(uint64_t segment_id, Segment* out,
                          std::shared_ptr<const void>* pin) const {
  std::shared_lock lock(state_->mu);
  auto it = state_->by_segment.find(segment_id);
  if (it == state_->by_segment.end()) {
    return Status::NotFound("segment " + std::to_string(segment_id) + " does not exist");
  }
  *out = it->second->segment;
  *pin = it->second;
  return Status::OK();
}

Status Memory::FindSegment(const void* ptr, size_t len, Segment* out,
                           std::shared_ptr<const void>* pin) const {
  std::shared_lock lock(state_->mu);
  const std::shared_ptr<Mapping>* m = state_->FindMapping(ptr, len);
  if (m == nullptr) return Status::NotFound("buffer does not lie inside one Memory allocation");
  *out = (*m)->segment;
  *pin = *m;
  return Status::OK();
}

bool Memory::Contains(const void* ptr, size_t len) const {
  std::shared_lock lock(state_->mu);
  return state_->FindMapping(ptr, len) != nullptr;
}

}  // namespace ramp::transport
