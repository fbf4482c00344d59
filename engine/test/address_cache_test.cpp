// The GET* address caches: the private map, and the table in memory that processes share.
// The shared cache is tested across real processes (fork) on a MAP_SHARED mapping.
#include "ramp/address_cache.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace ramp {
namespace {

OneSidedAddress AddressFor(uint64_t v) {
  // Every field derives from v, so that a torn entry (fields of two stores) is detectable.
  OneSidedAddress a;
  a.node = static_cast<uint32_t>(v % 7);
  a.length = static_cast<uint32_t>(64 + v % 1000);
  a.instance = v * 3 + 1;
  a.placement_epoch = v * 5 + 2;
  a.offset = v * 4096;
  a.record_epoch = static_cast<uint32_t>(v * 11);
  return a;
}

bool Consistent(const OneSidedAddress& a) {
  const uint64_t v = a.offset / 4096;
  const OneSidedAddress want = AddressFor(v);
  return a.offset % 4096 == 0 && a.node == want.node && a.length == want.length &&
         a.instance == want.instance && a.placement_epoch == want.placement_epoch &&
         a.record_epoch == want.record_epoch;
}

class SharedMemory {
 public:
  explicit SharedMemory(size_t bytes) : bytes_(bytes) {
    p_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  }
  ~SharedMemory() {
    if (p_ != MAP_FAILED) munmap(p_, bytes_);
  }
  void* get() const { return p_ == MAP_FAILED ? nullptr : p_; }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_;
  void* p_;
};

// Runs fn in a child process; returns its exit code.
template <typename Fn>
int InChild(Fn fn) {
  const pid_t pid = fork();
  if (pid == 0) _exit(fn());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(LocalAddressCache, StoreLookupEraseOnlyTheStaleOne) {
  auto c = NewLocalAddressCache();
  OneSidedAddress out;
  EXPECT_FALSE(c->Lookup(1, "k", &out));
  c->Store(1, "k", AddressFor(10));
  ASSERT_TRUE(c->Lookup(1, "k", &out));
  EXPECT_EQ(out.offset, AddressFor(10).offset);
  EXPECT_FALSE(c->Lookup(2, "k", &out)) << "keyspaces are apart";
  c->Erase(1, "k", AddressFor(9));  // not the address it holds: stays
  EXPECT_TRUE(c->Lookup(1, "k", &out));
  c->Erase(1, "k", AddressFor(10));
  EXPECT_FALSE(c->Lookup(1, "k", &out));
}

// The private table grows and erases by shifting probe runs back: after thousands of keys
// stored, half of them erased (in an order unrelated to where they sit) and some stored
// again, every key left is found with its own address and no erased one is.
TEST(LocalAddressCache, ManyKeysGrowEraseAndStoreAgain) {
  auto c = NewLocalAddressCache();
  constexpr uint64_t kKeys = 5000;
  auto key = [](uint64_t i) { return "key-" + std::to_string(i); };
  for (uint64_t i = 0; i < kKeys; i++) c->Store(1 + i % 2, key(i), AddressFor(i));
  OneSidedAddress out;
  for (uint64_t i = 0; i < kKeys; i++) {
    ASSERT_TRUE(c->Lookup(1 + i % 2, key(i), &out)) << i;
    ASSERT_EQ(out.offset, AddressFor(i).offset) << i;
    ASSERT_FALSE(c->Lookup(2 - i % 2, key(i), &out)) << "keyspaces are apart: " << i;
  }
  std::vector<bool> erased(kKeys, false);
  for (uint64_t n = 0; n < kKeys; n++) {
    const uint64_t i =
        (n * 7919) % kKeys;  // a permutation (7919 is prime, kKeys is not a multiple)
    if (i % 3 == 0) {
      c->Erase(1 + i % 2, key(i), AddressFor(i + 1));  // not its address: stays
    } else if (i % 2 == 0 || i % 5 == 0) {
      c->Erase(1 + i % 2, key(i), AddressFor(i));
      erased[i] = true;
    }
  }
  for (uint64_t i = 0; i < kKeys; i++) {
    ASSERT_EQ(c->Lookup(1 + i % 2, key(i), &out), !erased[i]) << i;
    if (!erased[i]) {
      ASSERT_EQ(out.offset, AddressFor(i).offset) << i;
    }
  }
  for (uint64_t i = 0; i < kKeys; i += 4) {
    c->Store(1 + i % 2, key(i), AddressFor(i + kKeys));
    erased[i] = false;
  }
  for (uint64_t i = 0; i < kKeys; i++) {
    ASSERT_EQ(c->Lookup(1 + i % 2, key(i), &out), !erased[i]) << i;
    if (!erased[i]) {
      ASSERT_EQ(out.offset, AddressFor(i % 4 == 0 ? i + kKeys : i).offset) << i;
    }
  }
}

SharedGroup GroupOf(uint64_t version, std::vector<SharedGroupEntry> entries) {
  SharedGroup g;
  g.node = 2;
  g.instance_hash = 0x1234;
  g.placement_epoch = 9;
  g.version_offset = 4096;
  g.version = version;
  g.entries = std::move(entries);
  return g;
}

void ExpectSame(const SharedGroup& got, const SharedGroup& want) {
  EXPECT_EQ(got.node, want.node);
  EXPECT_EQ(got.instance_hash, want.instance_hash);
  EXPECT_EQ(got.placement_epoch, want.placement_epoch);
  EXPECT_EQ(got.version_offset, want.version_offset);
  EXPECT_EQ(got.version, want.version);
  EXPECT_EQ(got.value_flag, want.value_flag);
  ASSERT_EQ(got.entries.size(), want.entries.size());
  for (size_t i = 0; i < want.entries.size(); i++) {
    EXPECT_EQ(got.entries[i].suffix, want.entries[i].suffix) << i;
    EXPECT_EQ(got.entries[i].ts_time, want.entries[i].ts_time) << i;
    EXPECT_EQ(got.entries[i].ts_client, want.entries[i].ts_client) << i;
  }
}

// Groups of several entries take several lines: another process reads them back exactly
// (entries of two timestamps, in order), a group over the limit is not kept, and a group
// whose lines are not all there, or not all of one store, reads as a miss, never as part of
// a group or a mix of two.
TEST(SharedAddressCache, SmallGroupsAreSharedWholeOrNotAtAll) {
  SharedMemory m(SharedAddressCacheBytes(4096));
  auto cache = AttachSharedAddressCache(m.get(), m.bytes(), true);
  ASSERT_NE(cache, nullptr);
  std::vector<SharedGroupEntry> seven;
  for (uint64_t i = 0; i < 7; i++) seven.push_back({100 + i, i < 3 ? 50u : 60u, 7});
  const SharedGroup g = GroupOf(11, seven);
  cache->StoreGroup(1, "g", g);
  const int rc = InChild([&] {
    auto child = AttachSharedAddressCache(m.get(), m.bytes(), false);
    SharedGroup got;
    if (child == nullptr || !child->LookupGroup(1, "g", &got)) return 1;
    if (got.entries.size() != 7 || got.entries[3].suffix != 103 || got.entries[3].ts_time != 60) {
      return 2;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0);
  SharedGroup got;
  ASSERT_TRUE(cache->LookupGroup(1, "g", &got));
  ExpectSame(got, g);
  EXPECT_FALSE(cache->LookupGroup(2, "g", &got)) << "another keyspace";
  // Empty and one-entry groups: one line each.
  cache->StoreGroup(1, "empty", GroupOf(3, {}));
  ASSERT_TRUE(cache->LookupGroup(1, "empty", &got));
  ExpectSame(got, GroupOf(3, {}));
  SharedGroup one = GroupOf(4, {{77, 5, 6}});
  one.value_flag = true;
  cache->StoreGroup(1, "one", one);
  ASSERT_TRUE(cache->LookupGroup(1, "one", &got));
  ExpectSame(got, one);
  // Over the limit: not kept.
  std::vector<SharedGroupEntry> many(kMaxSharedGroupEntries + 1, SharedGroupEntry{1, 2, 3});
  for (size_t i = 0; i < many.size(); i++) many[i].suffix = i;
  cache->StoreGroup(1, "many", GroupOf(5, many));
  EXPECT_FALSE(cache->LookupGroup(1, "many", &got));
  many.pop_back();
  cache->StoreGroup(1, "many", GroupOf(5, many));
  ASSERT_TRUE(cache->LookupGroup(1, "many", &got));
  ExpectSame(got, GroupOf(5, many));
  // A store of a newer version cut short after its first line (an entry it cannot keep):
  // the old first line now leads to a line of the new store. A miss, not a mix.
  std::vector<SharedGroupEntry> changed = seven;
  for (auto& e : changed) e.suffix += 1000;
  changed[5].suffix = ~uint64_t{0};
  cache->StoreGroup(1, "g", GroupOf(12, changed));
  EXPECT_FALSE(cache->LookupGroup(1, "g", &got)) << "a mix of two stores";
  // A full table evicts lines of large groups: each reads whole or not at all.
  SharedMemory small(SharedAddressCacheBytes(16));
  auto tiny = AttachSharedAddressCache(small.get(), small.bytes(), true);
  ASSERT_NE(tiny, nullptr);
  int whole = 0;
  for (uint64_t round = 0; round < 40; round++) {
    std::vector<SharedGroupEntry> e;
    for (uint64_t i = 0; i < 9; i++) e.push_back({round * 100 + i, 1, 1});
    tiny->StoreGroup(1, "r" + std::to_string(round), GroupOf(round + 1, e));
    for (uint64_t back = 0; back <= round; back++) {
      if (!tiny->LookupGroup(1, "r" + std::to_string(back), &got)) continue;
      ASSERT_EQ(got.entries.size(), 9u) << back;
      for (uint64_t i = 0; i < 9; i++) ASSERT_EQ(got.entries[i].suffix, back * 100 + i);
      whole++;
    }
  }
  EXPECT_GT(whole, 0);
}

TEST(SharedAddressCache, RefusesBadMemory) {
  SharedMemory m(SharedAddressCacheBytes(1024));
  EXPECT_EQ(AttachSharedAddressCache(nullptr, m.bytes(), true), nullptr);
  EXPECT_EQ(AttachSharedAddressCache(static_cast<char*>(m.get()) + 8, m.bytes() - 8, true), nullptr)
      << "unaligned";
  EXPECT_EQ(AttachSharedAddressCache(m.get(), m.bytes(), false), nullptr)
      << "never initialized (no magic)";
  ASSERT_NE(AttachSharedAddressCache(m.get(), m.bytes(), true), nullptr);
  EXPECT_NE(AttachSharedAddressCache(m.get(), m.bytes(), false), nullptr);
  EXPECT_EQ(AttachSharedAddressCache(m.get(), 256, false), nullptr) << "smaller than its table";
}

TEST(SharedAddressCache, AnAddressOneProcessLearntServesAnother) {
  SharedMemory m(SharedAddressCacheBytes(1 << 16));
  auto parent = AttachSharedAddressCache(m.get(), m.bytes(), true);
  ASSERT_NE(parent, nullptr);
  const int rc = InChild([&] {
    auto child = AttachSharedAddressCache(m.get(), m.bytes(), false);
    if (child == nullptr) return 1;
    for (uint64_t v = 0; v < 10000; v++) child->Store(7, "key" + std::to_string(v), AddressFor(v));
    child->Count(5, 4, 3, 1);
    return 0;
  });
  ASSERT_EQ(rc, 0);
  int found = 0;
  for (uint64_t v = 0; v < 10000; v++) {
    OneSidedAddress a;
    if (!parent->Lookup(7, "key" + std::to_string(v), &a)) continue;
    found++;
    EXPECT_EQ(a.offset, AddressFor(v).offset);
    EXPECT_TRUE(Consistent(a));
  }
  // 65536 entries in sets of 4: a few sets may overflow, nearly every key stays.
  EXPECT_GE(found, 9900);
  const AddressCacheStats s = parent->Stats();
  EXPECT_TRUE(s.shared);
  EXPECT_EQ(s.stores, 10000u);
  EXPECT_EQ(s.lookups, 5u);
  EXPECT_EQ(s.found, 4u);
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.fallbacks, 1u);
  EXPECT_GE(s.capacity, 1u << 16);
}

TEST(SharedAddressCache, FullTableEvictsAndStaysCorrect) {
  SharedMemory m(SharedAddressCacheBytes(64));
  auto c = AttachSharedAddressCache(m.get(), m.bytes(), true);
  ASSERT_NE(c, nullptr);
  for (uint64_t v = 0; v < 5000; v++) c->Store(1, std::to_string(v), AddressFor(v));
  int found = 0;
  for (uint64_t v = 0; v < 5000; v++) {
    OneSidedAddress a;
    if (!c->Lookup(1, std::to_string(v), &a)) continue;
    found++;
    EXPECT_EQ(a.offset, AddressFor(v).offset) << "another key's address returned";
  }
  EXPECT_GT(found, 0);
  EXPECT_LE(found, 64 * 2);
}

TEST(SharedAddressCache, ConcurrentWritersNeverShowATornEntry) {
  SharedMemory m(SharedAddressCacheBytes(16));  // few entries: maximal contention
  auto c = AttachSharedAddressCache(m.get(), m.bytes(), true);
  ASSERT_NE(c, nullptr);
  auto hammer = [&](uint64_t seed) {
    auto me = AttachSharedAddressCache(m.get(), m.bytes(), false);
    if (me == nullptr) return 1;
    uint64_t torn = 0;
    for (uint64_t i = 0; i < 300000; i++) {
      const uint64_t v = seed * 1000003 + i;
      const std::string key(1, static_cast<char>('a' + i % 8));
      me->Store(1, key, AddressFor(v));
      OneSidedAddress a;
      if (me->Lookup(1, key, &a) && !Consistent(a)) torn++;
      if (i % 7 == 0) me->Erase(1, key, a);
    }
    return torn == 0 ? 0 : 2;
  };
  const pid_t pid = fork();
  if (pid == 0) _exit(hammer(1));
  const int mine = hammer(2);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(mine, 0) << "the parent read a torn entry";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child read a torn entry";
}

}  // namespace
}  // namespace ramp
