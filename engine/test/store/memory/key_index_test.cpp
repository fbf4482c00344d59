// The partition hash index against a reference map, including forced hash collisions.
#include "store/memory/key_index.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>
#include "numbered.h"

namespace ramp::store {
namespace {

using ::ramp::testing::Numbered;

// Slots name their key through `current`, used here as an index into keys_.
class KeyIndexTest : public ::testing::Test {
 protected:
  KeySlot* Find(uint64_t hash, const std::string& key) {
    return index_.Find(hash, key,
                       [this](const KeySlot& s) -> std::string_view { return keys_[s.current]; });
  }
  void Insert(uint64_t hash, const std::string& key) {
    KeySlot* s = index_.Insert(hash);
    s->current = keys_.size();
    keys_.push_back(key);
  }
  KeyIndex index_;
  std::vector<std::string> keys_;
};

TEST_F(KeyIndexTest, RandomOperationsMatchAReferenceMap) {
  std::mt19937_64 rng(42);
  std::map<std::string, uint64_t> reference;  // key -> hash
  for (int op = 0; op < 200000; ++op) {
    const std::string key = Numbered("k", rng() % 5000);
    // Few distinct hashes (including 0) so that probe runs are long and collide.
    const uint64_t hash = (rng() % 3 == 0) ? 0 : std::hash<std::string>()(key) % 512;
    const uint64_t h = reference.count(key) ? reference[key] : hash;
    KeySlot* slot = Find(h, key);
    ASSERT_EQ(slot != nullptr, reference.count(key) == 1) << key;
    if (slot == nullptr) {
      Insert(h, key);
      reference[key] = h;
    } else if (rng() % 2 == 0) {
      index_.Erase(slot);
      reference.erase(key);
    }
    ASSERT_EQ(index_.size(), reference.size());
  }
  for (const auto& [key, h] : reference) ASSERT_NE(Find(h, key), nullptr) << key;
  size_t visited = 0;
  index_.ForEach([&](KeySlot&) { return ++visited > 0; });
  EXPECT_EQ(visited, reference.size());
}

TEST_F(KeyIndexTest, FindByExtraFindsTheOwningSlot) {
  for (int i = 0; i < 1000; ++i) Insert(static_cast<uint64_t>(i % 37), Numbered("key", i));
  KeySlot* slot = Find(5, "key5");
  ASSERT_NE(slot, nullptr);
  slot->extra = std::make_unique<KeyVersions>();
  slot->extra->hash = slot->hash;
  KeyVersions* extra = slot->extra.get();
  // Growing and erasing others moves slots around; the owner is still found.
  for (int i = 1000; i < 5000; ++i) Insert(static_cast<uint64_t>(i % 37), Numbered("key", i));
  for (int i = 0; i < 5000; i += 2)
    index_.Erase(Find(static_cast<uint64_t>(i % 37), Numbered("key", i)));
  KeySlot* owner = index_.FindByExtra(extra);
  ASSERT_NE(owner, nullptr);
  EXPECT_EQ(keys_[owner->current], "key5");
}

TEST_F(KeyIndexTest, ForEachStopsWhenAsked) {
  for (int i = 0; i < 100; ++i) Insert(static_cast<uint64_t>(i), Numbered("k", i));
  int visited = 0;
  index_.ForEach([&](KeySlot&) { return ++visited < 10; });
  EXPECT_EQ(visited, 10);
  index_.Clear();
  EXPECT_EQ(index_.size(), 0u);
  EXPECT_EQ(Find(1, "k1"), nullptr);
}

}  // namespace
}  // namespace ramp::store

namespace ramp::store {
namespace {

Version V(uint64_t time) {
  return Version{.ts = Timestamp{time, 1}, .loc = time};
}

std::vector<uint64_t> Times(const VersionList& l) {
  std::vector<uint64_t> out;
  for (const Version& v : l) out.push_back(v.ts.time);
  return out;
}

TEST(VersionListTest, GrowsPastItsInlineVersionAndKeepsOrder) {
  VersionList l;
  EXPECT_TRUE(l.empty());
  for (uint64_t t = 1; t <= 5; t++) l.push_back(V(t));
  EXPECT_EQ(l.size(), 5u);
  EXPECT_EQ(Times(l), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  l.erase(l.data() + 1);
  EXPECT_EQ(Times(l), (std::vector<uint64_t>{1, 3, 4, 5}));
  l.erase_if([](const Version& v) { return v.ts.time % 2 == 1; });
  EXPECT_EQ(Times(l), (std::vector<uint64_t>{4}));
  EXPECT_EQ(l.front().loc, 4u);
  l.erase(l.data());
  EXPECT_TRUE(l.empty());
  l.push_back(V(9));
  EXPECT_EQ(Times(l), (std::vector<uint64_t>{9}));
}

}  // namespace
}  // namespace ramp::store
