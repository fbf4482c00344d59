#include "store/durable/page_file.h"

#include "common/record.h"
#include "ramp/log.h"
#include "store/durable/env.h"

namespace ramp::store {

Status PageFile::Create(Env* env, const std::string& dir, const PartitionId& id, bool direct_io,
                        std::unique_ptr<PageFile>* out) {
  const std::string path =
      dir + "/" + std::to_string(id.keyspace) + "-" + std::to_string(id.bucket) + ".pages";
  std::unique_ptr<File> file;
  RAMP_RETURN_IF_ERROR(env->Open(path, true, &file));
  RAMP_RETURN_IF_ERROR(file->Truncate(0));
  std::unique_ptr<File> direct;
  if (direct_io) {
    if (Status st = env->OpenDirect(path, &direct); !st.ok()) {
      RAMP_WARN("%s: O_DIRECT refused (%s): page reads go through the page cache", path.c_str(),
                st.ToString().c_str());
      direct.reset();
    }
  }
  out->reset(new PageFile(env, path, std::move(file), std::move(direct)));
  return Status::OK();
}

PageFile::~PageFile() = default;

uint64_t PageFile::OffsetOf(uint32_t page_no) {
  return uint64_t{page_no} * record::kPageBytes;
}

void PageFile::Write(uint32_t page_no, uint32_t run, const uint8_t* data) {
  const size_t len = size_t{run} * record::kPageBytes;
  if (Status st = file_->Write(OffsetOf(page_no), data, len); !st.ok()) {
    RAMP_ERROR("%s: cannot write page %u: %s", path_.c_str(), page_no, st.ToString().c_str());
    return;
  }
  if (on_disk_.size() < size_t{page_no} + run) on_disk_.resize(size_t{page_no} + run);
  for (uint32_t i = 0; i < run; i++) on_disk_[page_no + i] = true;
}

Status PageFile::Rewrite(uint32_t page_no, const uint8_t* data) {
  return file_->Write(OffsetOf(page_no), data, record::kPageBytes)
      .Annotate(path_ + ": rewriting page " + std::to_string(page_no));
}

Status PageFile::ReadPage(uint32_t page_no, uint8_t* dst) const {
  size_t got = 0;
  RAMP_RETURN_IF_ERROR(file_->Read(OffsetOf(page_no), record::kPageBytes, dst, &got)
                           .Annotate(path_ + ": reading page " + std::to_string(page_no)));
  if (got != record::kPageBytes) {
    return Status::IOError(path_ + ": short read of page " + std::to_string(page_no) + ": " +
                           std::to_string(got) + " of " + std::to_string(record::kPageBytes) +
                           " bytes");
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
  if (Status st = env_->Remove(path_); !st.ok()) {
    RAMP_WARN("cannot remove %s: %s", path_.c_str(), st.ToString().c_str());
  }
}

}  // namespace ramp::store
