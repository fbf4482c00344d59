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
