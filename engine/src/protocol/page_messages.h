// Wire messages of remote page I/O (DESIGN §6): READ_PAGES and the scan handshake
// SCAN_OPEN. Kept apart from messages.h, which they share the header format with.
//
// READ_PAGES (count = items):
//   request body: RemoteRegion dest (32) | u8 flags | u8 0 | u16 0 | u32 0
//                 count x (u64 keyspace, u32 bucket, u32 page_no, u32 epoch, u32 length,
//                          u64 dest_offset)
//   reply body:   count x (u64 keyspace, u32 bucket, u32 page_no, u32 epoch, u32 length,
//                          u64 dest_offset, u16 status code, u16 message length, message)
// Item i of the reply names the page of item i of the request and, when its status is OK,
// says that `length` bytes of the page were written one-sided at dest_offset of dest before
// the reply was sent. A client uses no byte of a page whose reply item does not match what
// it asked for.
//
// SCAN_OPEN (count = partitions):
//   request body: ts snapshot (16) | count x (u64 keyspace, u32 bucket)
//   reply body:   count x (u32 epoch, u32 page_count, u32 pending)
// Raises every partition's watermark to the snapshot (PREPAREs at or below it are refused
// from now on) and says how many transactions at or below it are still prepared and
// undecided there, and how many pages the partition's log has.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ramp/status.h"
#include "ramp/transport/memory.h"
#include "ramp/types.h"

namespace ramp::protocol {

// Read lengths: a multiple of 512 bytes (O_DIRECT granularity), at most two pages.
inline constexpr uint32_t kPageReadGranule = 512;
inline constexpr uint32_t kMaxPageReadBytes = 16384;
// Flags of READ_PAGES.
inline constexpr uint8_t kPagesPreferDisk = 1u << 0;  // read from the page file when there
// The reader is the target of a migration: pages of a copy the server released (it no
// longer serves the partition) are served at the epoch it had, until the copy is dropped.
inline constexpr uint8_t kPagesMigration = 1u << 1;

struct PageAddress {
  PartitionId part;
  uint32_t page_no = 0;
  uint32_t epoch = 0;
  bool operator==(const PageAddress&) const = default;
};

struct PageReadItem {
  PageAddress page;
  uint32_t length = 8192;
  uint64_t dest_offset = 0;
};
struct ReadPagesRequest {
  transport::RemoteRegion dest;
  uint8_t flags = 0;
  std::vector<PageReadItem> items;
};
struct PageReadResult {
  PageReadItem item;  // echo of what was asked
  Status status;
};
struct ReadPagesReply {
  std::vector<PageReadResult> results;
};
void Encode(const ReadPagesRequest& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, ReadPagesRequest* out);
void Encode(const ReadPagesReply& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, ReadPagesReply* out);

struct ScanOpenRequest {
  Timestamp snapshot;
  std::vector<PartitionId> partitions;
};
struct ScanOpenPartition {
  uint32_t epoch = 0;
  uint32_t page_count = 0;
  uint32_t pending = 0;
};
struct ScanOpenReply {
  std::vector<ScanOpenPartition> partitions;
};
void Encode(const ScanOpenRequest& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, ScanOpenRequest* out);
void Encode(const ScanOpenReply& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, ScanOpenReply* out);

}  // namespace ramp::protocol
