#include "shm/shm_import.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/region.h"

namespace ramp::transport::detail {

ImportTable::~ImportTable() {
  for (auto& [key, m] : segments_) munmap(m.base, m.length);
}

Status ImportTable::AddSegment(const wire::SegmentInfo& info, UniqueFd fd) {
  const std::string name = "segment " + std::to_string(info.segment_id);
  auto key = std::make_pair(info.segment_id, info.writable);
  if (segments_.count(key) != 0) return Status::OK();  // already mapped; fd closes here

  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Status::FromErrno("fstat " + name, errno);
  if (!S_ISREG(st.st_mode)) return Status::Corruption(name + " is not a memory file");
  int seals = fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return Status::PermissionDenied(name + " is not sealed against shrinking");
  }
  if (static_cast<uint64_t>(st.st_size) < info.length) {
    return Status::Corruption(name + ": " + std::to_string(info.length) + " bytes announced, " +
                              std::to_string(st.st_size) + " present");
  }
  int mode = fcntl(fd.get(), F_GETFL);
  if (mode < 0) return Status::FromErrno("fcntl " + name, errno);
  if (info.writable && (mode & O_ACCMODE) != O_RDWR) {
    return Status::Corruption(name + " announced writable but sent read-only");
  }
  const int prot = PROT_READ | (info.writable ? PROT_WRITE : 0);
  void* base = mmap(nullptr, info.length, prot, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) return Status::FromErrno("mmap " + name, errno);
  segments_[key] = Mapping{static_cast<uint8_t*>(base), info.length};
  return Status::OK();
}

Status ImportTable::AddRegion(const wire::Expose& expose) {
  const bool writable = (expose.region.access & kAccessWrite) != 0;
  Region region;
  region.handle = expose.region;
  uint64_t at = 0;
  for (const SegmentPiece& p : expose.pieces) {
    // A writable region needs the writable mapping; a read-only one prefers the read-only
    // mapping (the one a peer hands out for read-only memory) and may use a writable one.
    auto it = segments_.find({p.segment_id, writable});
    if (it == segments_.end() && !writable) it = segments_.find({p.segment_id, true});
    if (it == segments_.end()) {
      return Status::Corruption("region " + std::to_string(expose.region.id) + " names segment " +
                                std::to_string(p.segment_id) + " that was not sent " +
                                (writable ? "writable" : ""));
    }
    const Mapping& m = it->second;
    if (p.offset > m.length || p.length > m.length - p.offset) {
      return Status::Corruption("region " + std::to_string(expose.region.id) +
                                ": piece outside segment " + std::to_string(p.segment_id));
    }
    region.pieces.push_back(Piece{m.base + p.offset, p.length, at});
    at += p.length;
  }
  regions_[expose.region.id] = std::move(region);
  return Status::OK();
}

Status ImportTable::Copy(const RemoteRegion& handle, uint64_t offset, uint64_t len, uint32_t access,
                         void* local) const {
  auto it = regions_.find(handle.id);
  if (it == regions_.end()) {
    return Status::NotFound("region " + std::to_string(handle.id) + " not exposed");
  }
  const Region& r = it->second;
  RAMP_RETURN_IF_ERROR(CheckRegionAccess(r.handle, handle, offset, len, access));
  if (len == 0) return Status::OK();
  const bool write = (access & kAccessWrite) != 0;
  uint8_t* mine = static_cast<uint8_t*>(local);
  size_t i = 0;
  if (r.pieces.size() > 1) {
    auto pos = std::upper_bound(r.pieces.begin(), r.pieces.end(), offset,
                                [](uint64_t off, const Piece& p) { return off < p.region_offset; });
    i = static_cast<size_t>(pos - r.pieces.begin()) - 1;
  }
  uint64_t within = offset - r.pieces[i].region_offset;
  while (len > 0) {
    const Piece& p = r.pieces[i++];
    const uint64_t take = std::min(len, p.length - within);
    if (write) {
      std::memcpy(p.data + within, mine, take);
    } else {
      std::memcpy(mine, p.data + within, take);
    }
    mine += take;
    len -= take;
    within = 0;
  }
  return Status::OK();
}

Status ImportTable::MapRange(uint64_t segment_id, uint64_t offset, uint64_t len, bool writable,
                             uint8_t** out) const {
  auto it = segments_.find({segment_id, writable});
  if (it == segments_.end()) {
    return Status::NotFound("segment " + std::to_string(segment_id) + " not imported");
  }
  if (offset > it->second.length || len > it->second.length - offset) {
    return Status::Corruption("range outside segment " + std::to_string(segment_id));
  }
  *out = it->second.base + offset;
  return Status::OK();
}

}  // namespace ramp::transport::detail
