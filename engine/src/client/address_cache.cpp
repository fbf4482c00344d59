// The GET* address caches: a private hash map, and a fixed-size table in shared memory that
// several processes read and write without locks (a sequence counter per entry).
#include "ramp/address_cache.h"

#include <atomic>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace ramp {
namespace {

bool SameAddress(const OneSidedAddress& a, const OneSidedAddress& b) {
  return a.node == b.node && a.length == b.length && a.instance == b.instance &&
         a.placement_epoch == b.placement_epoch && a.offset == b.offset &&
         a.record_epoch == b.record_epoch;
}

// A private cache: an open-addressing table (linear probing, a power-of-two number of slots,
// at most half full; erasing shifts the probe run back instead of leaving tombstones). A
// lookup, on GET*'s path, is one hash of the key (KeyHash, a word at a time) and mostly one
// slot: no allocation and no division (std::unordered_map's prime bucket count costs one).
class LocalAddressCache final : public AddressCache {
 public:
  bool Lookup(KeyspaceId keyspace, std::string_view key, OneSidedAddress* out) override {
    const size_t i = Find(keyspace, key, Hash(keyspace, key));
    if (i == kNone) return false;
    *out = slots_[i].address;
    return true;
  }

  void Store(KeyspaceId keyspace, std::string_view key, const OneSidedAddress& a) override {
    stats_.stores++;
    if ((count_ + 1) * 2 > slots_.size()) Grow();
    const uint64_t h = Hash(keyspace, key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.hash == 0) {
        s.hash = h;
        s.keyspace = keyspace;
        s.key.assign(key);
        s.address = a;
        count_++;
        return;
      }
      if (s.hash == h && s.keyspace == keyspace && s.key == key) {
        s.address = a;
        return;
      }
    }
  }

  void Erase(KeyspaceId keyspace, std::string_view key, const OneSidedAddress& seen) override {
    const size_t i = Find(keyspace, key, Hash(keyspace, key));
    if (i == kNone || !SameAddress(slots_[i].address, seen)) return;
    // Backward shift: every later entry of the probe run whose home slot is not between the
    // hole and itself moves into the hole, so that no lookup stops short at an empty slot.
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; slots_[j].hash != 0; j = (j + 1) & mask_) {
      const size_t home = slots_[j].hash & mask_;
      if (((j - home) & mask_) >= ((j - hole) & mask_)) {
        std::swap(slots_[hole], slots_[j]);
        hole = j;
      }
    }
    slots_[hole].hash = 0;
    slots_[hole].key.clear();
    count_--;
  }

  void Count(uint64_t lookups, uint64_t found, uint64_t hits, uint64_t fallbacks) override {
    stats_.lookups += lookups;
    stats_.found += found;
    stats_.hits += hits;
    stats_.fallbacks += fallbacks;
  }
  AddressCacheStats Stats() const override { return stats_; }

 private:
  static constexpr size_t kNone = ~size_t{0};
  struct Slot {
    uint64_t hash = 0;  // of (keyspace, key), never 0; 0: the slot is empty
    KeyspaceId keyspace = 0;
    std::string key;
    OneSidedAddress address;
  };

  static uint64_t Hash(KeyspaceId keyspace, std::string_view key) {
    uint64_t h = KeyHash(key) ^ (keyspace * 0x9e3779b97f4a7c15ull);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h | 1;
  }

  size_t Find(KeyspaceId keyspace, std::string_view key, uint64_t h) const {
    if (count_ == 0) return kNone;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.hash == 0) return kNone;
      if (s.hash == h && s.keyspace == keyspace && s.key == key) return i;
    }
  }

  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_ = std::vector<Slot>(old.empty() ? 16 : old.size() * 2);
    mask_ = slots_.size() - 1;
    for (Slot& o : old) {
      if (o.hash == 0) continue;
      size_t i = o.hash & mask_;
      while (slots_[i].hash != 0) i = (i + 1) & mask_;
      slots_[i] = std::move(o);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
  AddressCacheStats stats_;
};

// ---- shared ------------------------------------------------------------------------------
// Layout: one header line, then sets of kWays entries of one cache line each. Every field
// is an atomic word, so that concurrent readers and writers never race in the C++ sense; the
// sequence counter makes a reader discard an entry a writer changed under it.
constexpr uint64_t kMagic = 0x72616d7061646331ull;  // "rampadc1"
constexpr size_t kWays = 4;
constexpr size_t kLine = 64;

struct alignas(kLine) SharedHeader {
  uint64_t magic;
  uint64_t sets;
  std::atomic<uint64_t> lookups, found, hits, fallbacks, stores;
};

struct alignas(kLine) SharedEntry {
  std::atomic<uint64_t> seq;  // odd while a writer changes the entry
  std::atomic<uint64_t> tag;  // hash of (keyspace, key) | 1; 0 = empty
  std::atomic<uint64_t> node_length;
  std::atomic<uint64_t> instance;
  std::atomic<uint64_t> placement_epoch;
  std::atomic<uint64_t> offset;
  std::atomic<uint64_t> record_epoch;
  std::atomic<uint64_t> extra;  // groups only (SharedGroup)
};
static_assert(sizeof(SharedHeader) == kLine && sizeof(SharedEntry) == kLine);
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "shared memory needs address-free atomics");

uint64_t HashKey(KeyspaceId keyspace, std::string_view key) {
  // FNV-1a over the key, seeded with the keyspace, then a 64-bit finalizer (splitmix) so
  // that both the set (low bits) and the tag (all bits) are well mixed.
  uint64_t h = 0xcbf29ce484222325ull ^ (keyspace * 0x9e3779b97f4a7c15ull);
  for (unsigned char ch : key) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

class SharedAddressCache final : public AddressCache {
 public:
  SharedAddressCache(SharedHeader* header, SharedEntry* entries)
      : header_(header), entries_(entries) {}

  bool Lookup(KeyspaceId keyspace, std::string_view key, OneSidedAddress* out) override {
    const uint64_t h = HashKey(keyspace, key);
    const uint64_t tag = h | 1;
    SharedEntry* set = SetOf(h);
    for (size_t w = 0; w < kWays; w++) {
      SharedEntry& e = set[w];
      const uint64_t s1 = e.seq.load(std::memory_order_acquire);
      if ((s1 & 1) != 0 || e.tag.load(std::memory_order_relaxed) != tag) continue;
      OneSidedAddress a;
      const uint64_t nl = e.node_length.load(std::memory_order_relaxed);
      a.node = static_cast<uint32_t>(nl >> 32);
      a.length = static_cast<uint32_t>(nl);
      a.instance = e.instance.load(std::memory_order_relaxed);
      a.placement_epoch = e.placement_epoch.load(std::memory_order_relaxed);
      a.offset = e.offset.load(std::memory_order_relaxed);
      a.record_epoch = static_cast<uint32_t>(e.record_epoch.load(std::memory_order_relaxed));
      std::atomic_thread_fence(std::memory_order_acquire);
      if (e.seq.load(std::memory_order_relaxed) != s1) continue;  // changed under us
      *out = a;
      return true;
    }
    return false;
  }

  void Store(KeyspaceId keyspace, std::string_view key, const OneSidedAddress& a) override {
    Write(HashKey(keyspace, key), [&](SharedEntry& e) {
      e.node_length.store((uint64_t{a.node} << 32) | a.length, std::memory_order_relaxed);
      e.instance.store(a.instance, std::memory_order_relaxed);
      e.placement_epoch.store(a.placement_epoch, std::memory_order_relaxed);
      e.offset.store(a.offset, std::memory_order_relaxed);
      e.record_epoch.store(a.record_epoch, std::memory_order_relaxed);
    });
  }

  void Prefetch(KeyspaceId keyspace, std::string_view key) override {
    const SharedEntry* set = SetOf(HashKey(keyspace, key));
    for (size_t w = 0; w < kWays; w++) __builtin_prefetch(&set[w], 1);
  }

  void Erase(KeyspaceId keyspace, std::string_view key, const OneSidedAddress& seen) override {
    const uint64_t h = HashKey(keyspace, key);
    const uint64_t tag = h | 1;
    SharedEntry* set = SetOf(h);
    for (size_t w = 0; w < kWays; w++) {
      SharedEntry& e = set[w];
      if (e.tag.load(std::memory_order_relaxed) != tag) continue;
      uint64_t s = 0;
      if (!BeginWrite(e, &s)) return;
      // Only the address this reader found stale: a newer one stored meanwhile stays.
      if (e.tag.load(std::memory_order_relaxed) == tag &&
          e.offset.load(std::memory_order_relaxed) == seen.offset &&
          e.instance.load(std::memory_order_relaxed) == seen.instance &&
          e.placement_epoch.load(std::memory_order_relaxed) == seen.placement_epoch) {
        e.tag.store(0, std::memory_order_relaxed);
      }
      e.seq.store(s + 2, std::memory_order_release);
      return;
    }
  }

  // A group's first line: its tag is drawn from a salted keyspace (no address has it), and
  // the words hold node | flags | instance hash | epoch, version offset, version, then for a
  // group of at most one entry its suffix and timestamp, for a larger one (kMulti) the number
  // of entries. A larger group's entries follow in lines 1, 2, ... (tags from the group and
  // the line's number): a stamp of the first line's words, then a timestamp and up to three
  // suffixes of entries with that timestamp (kNoSuffix pads). A reader takes the group only
  // if every line is there with the stamp: lines of another store of the group (at another
  // version) or torn by a writer read as a miss.
  bool LookupGroup(KeyspaceId keyspace, std::string_view group, SharedGroup* out) override {
    uint64_t w[6];
    if (!ReadLine(GroupLineHash(keyspace, group, 0), w)) return false;
    const uint64_t w0 = w[0];
    if ((w0 >> 63) == 0) return false;  // not a group's entry
    SharedGroup g;
    g.version_offset = w[1];
    g.version = w[2];
    const bool has_entry = (w0 >> 62) & 1;
    g.value_flag = (w0 >> 61) & 1;
    const bool multi = (w0 >> 60) & 1;
    g.node = static_cast<uint32_t>((w0 >> 46) & 0x3FFF);
    g.instance_hash = static_cast<uint16_t>(w0 >> 30);
    g.placement_epoch = static_cast<uint32_t>(w0 & 0x3FFFFFFF);
    if (!multi) {
      if (has_entry) g.entries.push_back(SharedGroupEntry{w[3], w[4], w[5]});
      *out = std::move(g);
      return true;
    }
    const uint64_t count = w[3];
    if (count < 2 || count > kMaxSharedGroupEntries) return false;
    const uint64_t stamp = Stamp(w);
    g.entries.reserve(count);
    for (uint64_t line = 1; g.entries.size() < count && line <= count; line++) {
      uint64_t l[6];
      if (!ReadLine(GroupLineHash(keyspace, group, line), l) || l[0] != stamp) return false;
      for (size_t i = 3; i < 6 && l[i] != kNoSuffix; i++) {
        g.entries.push_back(SharedGroupEntry{l[i], l[1], l[2]});
      }
    }
    if (g.entries.size() != count) return false;
    *out = std::move(g);
    return true;
  }
  void StoreGroup(KeyspaceId keyspace, std::string_view group, const SharedGroup& g) override {
    if (g.node > 0x3FFF || g.entries.size() > kMaxSharedGroupEntries) return;
    const bool multi = g.entries.size() > 1;
    const uint64_t w0 = (uint64_t{1} << 63) | (uint64_t{!g.entries.empty()} << 62) |
                        (uint64_t{g.value_flag} << 61) | (uint64_t{multi} << 60) |
                        (uint64_t{g.node} << 46) | (uint64_t{g.instance_hash} << 30) |
                        (g.placement_epoch & 0x3FFFFFFF);
    uint64_t first[6] = {w0, g.version_offset, g.version, 0, 0, 0};
    if (!multi) {
      if (!g.entries.empty()) {
        first[3] = g.entries[0].suffix;
        first[4] = g.entries[0].ts_time;
        first[5] = g.entries[0].ts_client;
      }
      WriteLine(GroupLineHash(keyspace, group, 0), first);
      return;
    }
    first[3] = g.entries.size();
    const uint64_t stamp = Stamp(first);
    // The entries' lines first, then the line that makes them reachable.
    uint64_t line = 1;
    for (size_t i = 0; i < g.entries.size(); line++) {
      uint64_t l[6] = {stamp,    g.entries[i].ts_time, g.entries[i].ts_client, kNoSuffix, kNoSuffix,
                       kNoSuffix};
      for (size_t k = 3; k < 6 && i < g.entries.size(); k++, i++) {
        const SharedGroupEntry& e = g.entries[i];
        if (e.suffix == kNoSuffix) return;
        if (e.ts_time != l[1] || e.ts_client != l[2]) break;
        l[k] = e.suffix;
      }
      WriteLine(GroupLineHash(keyspace, group, line), l);
    }
    WriteLine(GroupLineHash(keyspace, group, 0), first);
  }
  void Count(uint64_t lookups, uint64_t found, uint64_t hits, uint64_t fallbacks) override {
    if (lookups != 0) header_->lookups.fetch_add(lookups, std::memory_order_relaxed);
    if (found != 0) header_->found.fetch_add(found, std::memory_order_relaxed);
    if (hits != 0) header_->hits.fetch_add(hits, std::memory_order_relaxed);
    if (fallbacks != 0) header_->fallbacks.fetch_add(fallbacks, std::memory_order_relaxed);
  }

  AddressCacheStats Stats() const override {
    AddressCacheStats s;
    s.lookups = header_->lookups.load(std::memory_order_relaxed);
    s.found = header_->found.load(std::memory_order_relaxed);
    s.hits = header_->hits.load(std::memory_order_relaxed);
    s.fallbacks = header_->fallbacks.load(std::memory_order_relaxed);
    s.stores = header_->stores.load(std::memory_order_relaxed);
    s.capacity = header_->sets * kWays;
    s.shared = true;
    return s;
  }

 private:
  static constexpr KeyspaceId kGroupSalt = 0x6772707300000000ull;  // "grps"
  static constexpr uint64_t kNoSuffix = ~uint64_t{0};
  static uint64_t GroupLineHash(KeyspaceId keyspace, std::string_view group, uint64_t line) {
    return HashKey(keyspace ^ kGroupSalt ^ (line * 0x9e3779b97f4a7c15ull), group);
  }
  // What a larger group's lines carry of its first line: all of its words, mixed.
  static uint64_t Stamp(const uint64_t w[6]) {
    uint64_t h = 0x73746d70ull;  // "stmp"
    for (int i = 0; i < 6; i++) {
      h ^= w[i];
      h *= 0xbf58476d1ce4e5b9ull;
      h ^= h >> 29;
    }
    return h;
  }
  // The six data words of the line with this hash's tag, if it is there and no writer
  // changed it while it was read.
  bool ReadLine(uint64_t h, uint64_t out[6]) const {
    const uint64_t tag = h | 1;
    SharedEntry* set = SetOf(h);
    for (size_t w = 0; w < kWays; w++) {
      SharedEntry& e = set[w];
      const uint64_t s1 = e.seq.load(std::memory_order_acquire);
      if ((s1 & 1) != 0 || e.tag.load(std::memory_order_relaxed) != tag) continue;
      out[0] = e.node_length.load(std::memory_order_relaxed);
      out[1] = e.instance.load(std::memory_order_relaxed);
      out[2] = e.placement_epoch.load(std::memory_order_relaxed);
      out[3] = e.offset.load(std::memory_order_relaxed);
      out[4] = e.record_epoch.load(std::memory_order_relaxed);
      out[5] = e.extra.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (e.seq.load(std::memory_order_relaxed) != s1) continue;  // changed under us
      return true;
    }
    return false;
  }
  void WriteLine(uint64_t h, const uint64_t w[6]) {
    Write(h, [&](SharedEntry& e) {
      e.node_length.store(w[0], std::memory_order_relaxed);
      e.instance.store(w[1], std::memory_order_relaxed);
      e.placement_epoch.store(w[2], std::memory_order_relaxed);
      e.offset.store(w[3], std::memory_order_relaxed);
      e.record_epoch.store(w[4], std::memory_order_relaxed);
      e.extra.store(w[5], std::memory_order_relaxed);
    });
  }
  SharedEntry* SetOf(uint64_t h) const { return entries_ + (h & (header_->sets - 1)) * kWays; }

  // Places an entry: the key's own, else an empty one, else a victim chosen by the number of
  // stores so far (cheap, and spreads evictions over the ways); `fill` writes the data words
  // under the entry's sequence counter.
  template <typename Fill>
  void Write(uint64_t h, Fill fill) {
    const uint64_t tag = h | 1;
    SharedEntry* set = SetOf(h);
    SharedEntry* target = nullptr;
    for (size_t w = 0; w < kWays && target == nullptr; w++) {
      if (set[w].tag.load(std::memory_order_relaxed) == tag) target = &set[w];
    }
    for (size_t w = 0; w < kWays && target == nullptr; w++) {
      if (set[w].tag.load(std::memory_order_relaxed) == 0) target = &set[w];
    }
    const uint64_t n = header_->stores.fetch_add(1, std::memory_order_relaxed);
    if (target == nullptr) target = &set[(n ^ (h >> 32)) % kWays];
    uint64_t s = 0;
    if (!BeginWrite(*target, &s)) return;  // another process is writing it: skip, a hint
    target->tag.store(tag, std::memory_order_relaxed);
    fill(*target);
    target->seq.store(s + 2, std::memory_order_release);
  }

  // Makes the entry's counter odd (this process now owns it) unless another writer does.
  static bool BeginWrite(SharedEntry& e, uint64_t* s) {
    *s = e.seq.load(std::memory_order_relaxed);
    if ((*s & 1) != 0) return false;
    if (!e.seq.compare_exchange_strong(*s, *s + 1, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
      return false;
    }
    std::atomic_thread_fence(std::memory_order_release);
    return true;
  }

  SharedHeader* header_;
  SharedEntry* entries_;
};

size_t SetsFor(size_t entries) {
  size_t sets = 1;
  while (sets * kWays < entries) sets <<= 1;
  return sets;
}

}  // namespace

std::unique_ptr<AddressCache> NewLocalAddressCache() {
  return std::make_unique<LocalAddressCache>();
}

size_t SharedAddressCacheBytes(size_t entries) {
  return sizeof(SharedHeader) + SetsFor(entries) * kWays * sizeof(SharedEntry);
}

std::unique_ptr<AddressCache> AttachSharedAddressCache(void* memory, size_t bytes,
                                                       bool initialize) {
  if (memory == nullptr || reinterpret_cast<uintptr_t>(memory) % kLine != 0 ||
      bytes < SharedAddressCacheBytes(kWays)) {
    return nullptr;
  }
  auto* header = static_cast<SharedHeader*>(memory);
  auto* entries = reinterpret_cast<SharedEntry*>(static_cast<char*>(memory) + sizeof(SharedHeader));
  if (initialize) {
    // The largest power-of-two number of sets that fits.
    size_t sets = 1;
    while (sizeof(SharedHeader) + sets * 2 * kWays * sizeof(SharedEntry) <= bytes) sets <<= 1;
    std::memset(memory, 0, sizeof(SharedHeader) + sets * kWays * sizeof(SharedEntry));
    new (header) SharedHeader{kMagic, sets, {0}, {0}, {0}, {0}, {0}};
    for (size_t i = 0; i < sets * kWays; i++) new (&entries[i]) SharedEntry{};
  } else if (header->magic != kMagic ||
             sizeof(SharedHeader) + header->sets * kWays * sizeof(SharedEntry) > bytes) {
    return nullptr;
  }
  return std::make_unique<SharedAddressCache>(header, entries);
}

}  // namespace ramp
