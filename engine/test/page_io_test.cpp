// Remote page I/O pieces that need no server: the READ_PAGES / SCAN_OPEN codecs and the
// client's check of a completion against its request. (The store's page files and
// LocatePage: store/durable/page_file_test.cpp.)
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/record.h"
#include "protocol/messages.h"
#include "protocol/page_messages.h"
#include "ramp/page_reader.h"

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

}  // namespace
}  // namespace ramp
