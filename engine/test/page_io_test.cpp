// Remote page I/O pieces that need no server: the READ_PAGES / SCAN_OPEN codecs, the
// client's check of a completion against its request, and the store's page files and
// LocatePage.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "common/record.h"
#include "protocol/messages.h"
#include "protocol/page_messages.h"
#include "ramp/page_reader.h"
#include "store_test_util.h"

namespace ramp {
namespace {

using protocol::PageReadItem;
using protocol::PageReadResult;

PageReadItem Item(uint32_t page, uint32_t epoch = 0, uint64_t off = 0) {
  return PageReadItem{{PartitionId{7, 3}, page, epoch}, 8192, off};
}

TEST(PageMessages, RoundTrip) {
  protocol::ReadPagesRequest req;
  req.dest = {5, 0xABCDEF, 1 << 20, transport::kAccessWrite, 0};
  req.flags = protocol::kPagesPreferDisk;
  req.items = {Item(1, 0, 0), Item(9, 2, 8192)};
  std::string body;
  protocol::Encode(req, &body);
  protocol::ReadPagesRequest back;
  ASSERT_TRUE(protocol::Decode(body, 2, &back).ok());
  EXPECT_EQ(back.dest, req.dest);
  EXPECT_EQ(back.flags, req.flags);
  ASSERT_EQ(back.items.size(), 2u);
  EXPECT_EQ(back.items[1].page, req.items[1].page);
  EXPECT_EQ(back.items[1].dest_offset, 8192u);

  protocol::ReadPagesReply rep;
  rep.results = {{Item(1), Status::OK()}, {Item(9), Status::IOError("short read: 4096 of 8192")}};
  body.clear();
  protocol::Encode(rep, &body);
  protocol::ReadPagesReply rback;
  ASSERT_TRUE(protocol::Decode(body, 2, &rback).ok());
  EXPECT_TRUE(rback.results[0].status.ok());
  EXPECT_TRUE(rback.results[1].status.Is(Status::Code::kIOError));
  EXPECT_EQ(rback.results[1].status.message(), "short read: 4096 of 8192");

  protocol::ScanOpenRequest so{{77, 1}, {PartitionId{7, 0}, PartitionId{7, 1}}};
  body.clear();
  protocol::Encode(so, &body);
  protocol::ScanOpenRequest soback;
  ASSERT_TRUE(protocol::Decode(body, 2, &soback).ok());
  EXPECT_EQ(soback.snapshot, so.snapshot);
  EXPECT_EQ(soback.partitions, so.partitions);
}

TEST(PageMessages, MalformedIsCorruption) {
  protocol::ReadPagesRequest req;
  req.items = {Item(1)};
  std::string body;
  protocol::Encode(req, &body);
  protocol::ReadPagesRequest back;
  // A count the body cannot hold, a truncated item, trailing bytes.
  EXPECT_TRUE(protocol::Decode(body, 1000000, &back).Is(Status::Code::kCorruption));
  EXPECT_TRUE(
      protocol::Decode(body.substr(0, body.size() - 3), 1, &back).Is(Status::Code::kCorruption));
  EXPECT_TRUE(protocol::Decode(body + "x", 1, &back).Is(Status::Code::kCorruption));
  EXPECT_TRUE(protocol::Decode(body.substr(0, 10), 0, &back).Is(Status::Code::kCorruption));

  protocol::ReadPagesReply rep;
  rep.results = {{Item(1), Status::OK()}};
  body.clear();
  protocol::Encode(rep, &body);
  body[body.size() - 4] = 99;  // status code no Status has
  protocol::ReadPagesReply rback;
  EXPECT_TRUE(protocol::Decode(body, 1, &rback).Is(Status::Code::kCorruption));
}

// A page as the server lays it out: header of (7, 3, page_no).
std::vector<uint8_t> Page(uint32_t page_no, KeyspaceId ks = 7, uint32_t bucket = 3) {
  std::vector<uint8_t> p(record::kPageBytes, 0);
  record::PageHeader h;
  h.keyspace = ks;
  h.bucket = bucket;
  h.page_no = page_no;
  record::WritePageHeader(h, p.data());
  return p;
}

TEST(CheckPageReply, AcceptsWhatWasAsked) {
  auto page = Page(4);
  EXPECT_TRUE(CheckPageReply(Item(4), {Item(4), Status::OK()}, page.data()).ok());
  // A page error carries no data; it is the page's status, not a mismatch.
  EXPECT_TRUE(CheckPageReply(Item(4), {Item(4), Status::IOError("eio")}, nullptr).ok());
}

TEST(CheckPageReply, RefusesAnotherPageStaleEpochOrPlace) {
  auto page = Page(4);
  EXPECT_TRUE(
      CheckPageReply(Item(4), {Item(5), Status::OK()}, page.data()).Is(Status::Code::kCorruption));
  EXPECT_TRUE(CheckPageReply(Item(4, 1), {Item(4, 0), Status::OK()}, page.data())
                  .Is(Status::Code::kCorruption));
  EXPECT_TRUE(CheckPageReply(Item(4, 0, 0), {Item(4, 0, 8192), Status::OK()}, page.data())
                  .Is(Status::Code::kCorruption));
  // The reply names the right page but the bytes are another page's (a reply matched to
  // the wrong request, a prefetch gone wrong): refused, never used.
  auto other = Page(5);
  EXPECT_TRUE(
      CheckPageReply(Item(4), {Item(4), Status::OK()}, other.data()).Is(Status::Code::kCorruption));
  auto other_part = Page(4, 8, 3);
  EXPECT_TRUE(CheckPageReply(Item(4), {Item(4), Status::OK()}, other_part.data())
                  .Is(Status::Code::kCorruption));
}

class PageFileTest : public store::testing::StoreTest {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ramp-pagefile-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.page_dir = dir_;
    Open();
  }
  void TearDown() override {
    store_.reset();
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  std::string dir_;
};

TEST_F(PageFileTest, CompletePagesGoToTheFileAndLocatePageFindsThem) {
  using store::testing::Part;
  using store::testing::Ts;
  const std::string value(1000, 'v');
  for (int i = 0; i < 40; i++) {
    const std::string key = "k" + std::to_string(i);
    ASSERT_TRUE(Prepare(Ts(10 + i), Part(), key, value).ok());
    ASSERT_TRUE(Commit(Ts(10 + i)).ok());
  }
  const uint32_t pages = store_->PageCount(Part());
  ASSERT_GT(pages, 3u);
  store::Store::PageLocation loc;
  ASSERT_TRUE(store_->LocatePage(Part(), 0, &loc).ok());
  ASSERT_NE(loc.frame, nullptr);
  ASSERT_GE(loc.fd, 0) << "a complete page has a copy in the page file";
  std::vector<uint8_t> disk(record::kPageBytes);
  ASSERT_EQ(pread(loc.fd, disk.data(), disk.size(), static_cast<off_t>(loc.file_offset)),
            static_cast<ssize_t>(disk.size()));
  record::PageHeader h;
  ASSERT_TRUE(record::ReadPageHeader(disk.data(), disk.size(), &h).ok());
  EXPECT_EQ(h.page_no, 0u);
  EXPECT_EQ(std::memcmp(disk.data(), loc.frame, record::kPageHeaderBytes), 0);

  // The head page is still being appended to: in memory only.
  ASSERT_TRUE(store_->LocatePage(Part(), pages - 1, &loc).ok());
  EXPECT_NE(loc.frame, nullptr);
  EXPECT_LT(loc.fd, 0);

  Status st = store_->LocatePage(Part(), pages + 5, &loc);
  EXPECT_TRUE(st.Is(Status::Code::kNotFound));
  EXPECT_NE(st.message().find("outside"), std::string::npos) << st.ToString();
  EXPECT_TRUE(store_->LocatePage(Part(9), 0, &loc).Is(Status::Code::kNotFound));
}

TEST_F(PageFileTest, DataLargerThanTheMemoryBudgetIsServed) {
  using store::testing::Part;
  using store::testing::Ts;
  options_.memory_bytes = size_t{16} << 20;
  options_.memory_budget_bytes = size_t{1} << 20;  // 128 pages
  Open();
  auto value = [](int i, int gen) {
    std::string v = "g" + std::to_string(gen) + "-" + std::to_string(i) + "-";
    v.resize(1000, 'x');
    return v;
  };
  constexpr int kKeys = 3000;  // about 3 MiB of records: three times the budget
  uint64_t t = 10;
  for (int i = 0; i < kKeys; i++) Put(Ts(t++), "k" + std::to_string(i), value(i, 0));
  // Overwrites flip valid bits on pages that were evicted meanwhile.
  for (int i = 0; i < kKeys; i += 10) Put(Ts(t++), "k" + std::to_string(i), value(i, 1));
  store::Store::PageLocation loc;
  ASSERT_TRUE(store_->LocatePage(Part(), 0, &loc).ok());
  EXPECT_EQ(loc.frame, nullptr) << "the oldest pages live only in the page file";
  EXPECT_GE(loc.fd, 0);
  EXPECT_GT(store_->PageCount(Part()), 3u * 128u);
  for (int i = 0; i < kKeys; i++) {
    auto r = Get("k" + std::to_string(i));
    ASSERT_EQ(r.status, protocol::ItemStatus::kOk) << i;
    ASSERT_EQ(r.value, value(i, i % 10 == 0 ? 1 : 0)) << i;
  }
  // Snapshot reads of the overwritten keys find the older version on disk too.
  for (int i = 0; i < kKeys; i += 10) {
    auto r =
        Get("k" + std::to_string(i), Ts(10 + static_cast<uint64_t>(i)), protocol::kGetSnapshot);
    ASSERT_EQ(r.status, protocol::ItemStatus::kOk) << i;
    ASSERT_EQ(r.value, value(i, 0)) << i;
  }
  // What a one-sided reader can find valid in memory is the current version only.
  std::map<std::string, int> valid;
  for (const auto& [off, rec] : ValidRecords()) {
    auto r = Get(rec.key);
    EXPECT_EQ(rec.ts, r.ts) << rec.key << " at " << off;
    EXPECT_EQ(++valid[rec.key], 1) << rec.key;
  }
  // A GC pass evicts what the reads brought back.
  store_->CollectGarbage();
  ASSERT_TRUE(store_->LocatePage(Part(), 0, &loc).ok());
  EXPECT_EQ(loc.frame, nullptr);
}

}  // namespace
}  // namespace ramp
