// The page files of the memory budget and remote page I/O (store/durable/page_file.h):
// what LocatePage reports, data larger than the memory budget, and faults of the file
// system (through the fault Env) that surface as a Status or leave pages in memory,
// never a crash.
#include "store/durable/page_file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/record.h"
#include "fault_env.h"
#include "store/durable/env.h"
#include "store_test_util.h"

namespace ramp::store {
namespace {

class PageFileTest : public testing::StoreTest {
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
  testing::FaultEnv fault_env_;  // for the tests that set options_.env to it
};

TEST_F(PageFileTest, CompletePagesGoToTheFileAndLocatePageFindsThem) {
  using testing::Part;
  using testing::Ts;
  const std::string value(1000, 'v');
  for (int i = 0; i < 40; i++) {
    const std::string key = "k" + std::to_string(i);
    ASSERT_TRUE(Prepare(Ts(10 + i), Part(), key, value).ok());
    ASSERT_TRUE(Commit(Ts(10 + i)).ok());
  }
  const uint32_t pages = store_->PageCount(Part());
  ASSERT_GT(pages, 3u);
  Store::PageLocation loc;
  ASSERT_TRUE(store_->LocatePage(Part(), 0, &loc).ok());
  ASSERT_NE(loc.frame, nullptr);
  ASSERT_NE(loc.file, nullptr) << "a complete page has a copy in the page file";
  EXPECT_GE(loc.file->fd(), 0) << "the POSIX Env hands out descriptors (io_uring reads them)";
  std::vector<uint8_t> disk(record::kPageBytes);
  size_t got = 0;
  ASSERT_TRUE(loc.file->Read(loc.file_offset, disk.size(), disk.data(), &got).ok());
  ASSERT_EQ(got, disk.size());
  record::PageHeader h;
  ASSERT_TRUE(record::ReadPageHeader(disk.data(), disk.size(), &h).ok());
  EXPECT_EQ(h.page_no, 0u);
  EXPECT_EQ(std::memcmp(disk.data(), loc.frame, record::kPageHeaderBytes), 0);

  // The head page is still being appended to: in memory only.
  ASSERT_TRUE(store_->LocatePage(Part(), pages - 1, &loc).ok());
  EXPECT_NE(loc.frame, nullptr);
  EXPECT_EQ(loc.file, nullptr);

  Status st = store_->LocatePage(Part(), pages + 5, &loc);
  EXPECT_TRUE(st.Is(Status::Code::kNotFound));
  EXPECT_NE(st.message().find("outside"), std::string::npos) << st.ToString();
  EXPECT_TRUE(store_->LocatePage(Part(9), 0, &loc).Is(Status::Code::kNotFound));
}

TEST_F(PageFileTest, DataLargerThanTheMemoryBudgetIsServed) {
  using testing::Part;
  using testing::Ts;
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
  Store::PageLocation loc;
  ASSERT_TRUE(store_->LocatePage(Part(), 0, &loc).ok());
  EXPECT_EQ(loc.frame, nullptr) << "the oldest pages live only in the page file";
  EXPECT_NE(loc.file, nullptr);
  EXPECT_GT(store_->PageCount(Part()), 3u * 128u);
  for (int i = 0; i < kKeys; i++) {
    auto r = Get("k" + std::to_string(i));
    ASSERT_EQ(r.status, ReadStatus::kOk) << i;
    ASSERT_EQ(r.value, value(i, i % 10 == 0 ? 1 : 0)) << i;
  }
  // Snapshot reads of the overwritten keys find the older version on disk too.
  for (int i = 0; i < kKeys; i += 10) {
    auto r = Get("k" + std::to_string(i), Ts(10 + static_cast<uint64_t>(i)), kReadSnapshot);
    ASSERT_EQ(r.status, ReadStatus::kOk) << i;
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

// A page of the file format: header, nothing else (ReadPage does not check it).
std::vector<uint8_t> SomePage(uint8_t fill) {
  return std::vector<uint8_t>(record::kPageBytes, fill);
}

class PageFileFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ramp-pagefault-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    Status st = PageFile::Create(&env_, dir_, PartitionId{7, 1}, false, &file_);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  void TearDown() override {
    file_.reset();
    std::string cmd = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
  }
  testing::FaultEnv env_;
  std::string dir_;
  std::unique_ptr<PageFile> file_;
};

TEST_F(PageFileFaultTest, AFailingReadIsAStatus) {
  const std::vector<uint8_t> page = SomePage(0x5A);
  file_->Write(3, 1, page.data());
  ASSERT_TRUE(file_->OnDisk(3, 1));
  EXPECT_EQ(file_->reader()->fd(), -1) << "a test Env gives no descriptor: reads go through it";

  std::vector<uint8_t> back(record::kPageBytes);
  env_.fail_reads = true;
  Status st = file_->ReadPage(3, back.data());
  EXPECT_TRUE(st.Is(Status::Code::kIOError)) << st.ToString();
  EXPECT_NE(st.message().find("reading page 3"), std::string::npos) << st.ToString();
  size_t got = 1;
  EXPECT_TRUE(file_->reader()
                  ->Read(PageFile::OffsetOf(3), back.size(), back.data(), &got)
                  .Is(Status::Code::kIOError));
  EXPECT_EQ(got, 0u);

  env_.fail_reads = false;
  ASSERT_TRUE(file_->ReadPage(3, back.data()).ok());
  EXPECT_EQ(back, page);
  // A page past the end of the file is a short read, also a Status.
  EXPECT_TRUE(file_->ReadPage(9, back.data()).Is(Status::Code::kIOError));
}

TEST_F(PageFileFaultTest, AFailingWriteLeavesThePageOffDisk) {
  const std::vector<uint8_t> page = SomePage(0x11);
  env_.bytes_left = 0;  // the disk is full
  file_->Write(0, 1, page.data());
  EXPECT_FALSE(file_->OnDisk(0, 1)) << "a page that was not written is not on disk";
  Status st = file_->Rewrite(0, page.data());
  EXPECT_TRUE(st.Is(Status::Code::kNoSpace)) << st.ToString();

  env_.bytes_left = -1;
  file_->Write(0, 1, page.data());
  EXPECT_TRUE(file_->OnDisk(0, 1));
  EXPECT_TRUE(file_->Rewrite(0, page.data()).ok());
  env_.read_only = true;
  EXPECT_TRUE(file_->Rewrite(0, page.data()).Is(Status::Code::kPermissionDenied));
}

// Through the store: with the disk full, no page reaches its page file, so the memory
// budget evicts nothing and every read is served from memory.
TEST_F(PageFileTest, AFullDiskKeepsPagesInMemory) {
  testing::FaultEnv& env = fault_env_;
  env.bytes_left = 0;
  options_.env = &env;
  options_.memory_bytes = size_t{16} << 20;
  options_.memory_budget_bytes = size_t{1} << 20;  // 128 pages
  Open();
  const std::string value(1000, 'v');
  constexpr int kKeys = 2000;  // about twice the budget
  for (int i = 0; i < kKeys; i++) {
    Put(testing::Ts(10 + static_cast<uint64_t>(i)), "k" + std::to_string(i), value);
  }
  store_->CollectGarbage();
  Store::PageLocation loc;
  ASSERT_TRUE(store_->LocatePage(testing::Part(), 0, &loc).ok());
  EXPECT_NE(loc.frame, nullptr) << "a page the file does not have is never evicted";
  EXPECT_EQ(loc.file, nullptr);
  for (int i = 0; i < kKeys; i++) {
    auto r = Get("k" + std::to_string(i));
    ASSERT_EQ(r.status, ReadStatus::kOk) << i;
    ASSERT_EQ(r.value, value) << i;
  }
  // Once the disk has room again, complete pages get their copy.
  env.bytes_left = -1;
  for (int i = 0; i < 40; i++) {
    Put(testing::Ts(10 + kKeys + static_cast<uint64_t>(i)), "n" + std::to_string(i), value);
  }
  const uint32_t pages = store_->PageCount(testing::Part());
  ASSERT_TRUE(store_->LocatePage(testing::Part(), pages - 2, &loc).ok());
  EXPECT_NE(loc.file, nullptr);
}

}  // namespace
}  // namespace ramp::store
