#include "store/page_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/record.h"
#include "ramp/log.h"

namespace ramp::store {

Status PageFile::Create(const std::string& dir, const PartitionId& id, bool direct_io,
                        std::unique_ptr<PageFile>* out) {
  const std::string path =
      dir + "/" + std::to_string(id.keyspace) + "-" + std::to_string(id.bucket) + ".pages";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  int direct_fd = -1;
  if (direct_io) {
    direct_fd = open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (direct_fd < 0) {
      RAMP_WARN("%s: O_DIRECT refused (%s): page reads go through the page cache", path.c_str(),
                std::strerror(errno));
    }
  }
  out->reset(new PageFile(path, fd, direct_fd));
  return Status::OK();
}

PageFile::~PageFile() {
  if (direct_fd_ >= 0) close(direct_fd_);
  if (fd_ >= 0) close(fd_);
}

uint64_t PageFile::OffsetOf(uint32_t page_no) {
  return uint64_t{page_no} * record::kPageBytes;
}

void PageFile::Write(uint32_t page_no, uint32_t run, const uint8_t* data) {
  const size_t len = size_t{run} * record::kPageBytes;
  size_t done = 0;
  while (done < len) {
    const ssize_t n =
        pwrite(fd_, data + done, len - done, static_cast<off_t>(OffsetOf(page_no) + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      RAMP_ERROR("%s: cannot write page %u: %s", path_.c_str(), page_no,
                 n < 0 ? std::strerror(errno) : "no progress");
      return;
    }
    done += static_cast<size_t>(n);
  }
  if (on_disk_.size() < size_t{page_no} + run) on_disk_.resize(size_t{page_no} + run);
  for (uint32_t i = 0; i < run; i++) on_disk_[page_no + i] = true;
}

Status PageFile::Rewrite(uint32_t page_no, const uint8_t* data) {
  size_t done = 0;
  while (done < record::kPageBytes) {
    const ssize_t n = pwrite(fd_, data + done, record::kPageBytes - done,
                             static_cast<off_t>(OffsetOf(page_no) + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return Status::FromErrno(path_ + ": rewriting page " + std::to_string(page_no),
                               n < 0 ? errno : EIO);
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

Status PageFile::ReadPage(uint32_t page_no, uint8_t* dst) const {
  size_t done = 0;
  while (done < record::kPageBytes) {
    const ssize_t n = pread(fd_, dst + done, record::kPageBytes - done,
                            static_cast<off_t>(OffsetOf(page_no) + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(path_ + ": reading page " + std::to_string(page_no), errno);
    if (n == 0) {
      return Status::IOError(path_ + ": short read of page " + std::to_string(page_no) + ": " +
                             std::to_string(done) + " of " + std::to_string(record::kPageBytes) +
                             " bytes");
    }
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

bool PageFile::OnDisk(uint32_t page_no, uint32_t count) const {
  if (size_t{page_no} + count > on_disk_.size()) return false;
  for (uint32_t i = 0; i < count; i++) {
    if (!on_disk_[page_no + i]) return false;
  }
  return true;
}

void PageFile::Unlink() {
  if (unlink(path_.c_str()) != 0 && errno != ENOENT) {
    RAMP_WARN("cannot remove %s: %s", path_.c_str(), std::strerror(errno));
  }
}

}  // namespace ramp::store
