#include "store/durable/wal.h"

#include <chrono>
#include <cstring>

#include "common/little_endian.h"
#include "common/record.h"
#include "ramp/log.h"

namespace ramp::store {
namespace {

constexpr uint32_t kWalMagic = 0x4c415752;    // "RWAL"
constexpr uint32_t kEntryMagic = 0x31455752;  // "RWE1"
constexpr uint32_t kWalVersion = 1;

}  // namespace

Status Wal::Open(Env* env, const std::string& path, uint64_t bytes, std::unique_ptr<Wal>* out,
                 std::vector<WalPatch>* entries) {
  entries->clear();
  const bool fresh = !env->Exists(path);
  std::unique_ptr<File> file;
  RAMP_RETURN_IF_ERROR(env->Open(path, true, &file));
  std::unique_ptr<Wal> wal(new Wal(std::move(file), bytes));
  uint64_t size = 0;
  RAMP_RETURN_IF_ERROR(wal->file_->Size(&size));
  if (fresh || size < kHeaderBytes) {
    // Preallocated whole: its size never changes, so its fdatasync skips the journal.
    const std::string zeros(1 << 20, '\0');
    for (uint64_t at = 0; at < bytes; at += zeros.size()) {
      RAMP_RETURN_IF_ERROR(
          wal->file_->Write(at, zeros.data(), std::min<uint64_t>(zeros.size(), bytes - at)));
    }
    RAMP_RETURN_IF_ERROR(wal->WriteHeader());
    wal->OpenSyncWrites(env, path);
    *out = std::move(wal);
    return Status::OK();
  }
  std::string data(size, '\0');
  size_t got = 0;
  RAMP_RETURN_IF_ERROR(wal->file_->Read(0, size, data.data(), &got));
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  if (le::Load32(p) != kWalMagic || record::Crc32c(p, 16) != le::Load32(p + 16)) {
    return Status::Corruption(path + ": not a rampd write-ahead log (bad header)");
  }
  if (le::Load32(p + 4) != kWalVersion) {
    return Status::NotSupported(path + ": write-ahead log version " +
                                std::to_string(le::Load32(p + 4)) + " is not supported");
  }
  wal->generation_ = le::Load64(p + 8);
  uint64_t at = kHeaderBytes;
  while (at + kEntryHeaderBytes <= got) {
    const uint8_t* e = p + at;
    if (le::Load32(e) != kEntryMagic || le::Load64(e + 8) != wal->generation_) break;
    const uint32_t len = le::Load32(e + 40);
    if (at + kEntryHeaderBytes + len > got) break;
    if (record::Crc32c(e + 8, kEntryHeaderBytes - 8 + len) != le::Load32(e + 4)) break;
    WalPatch w;
    w.partition = PartitionId{le::Load64(e + 16), le::Load32(e + 24)};
    w.segment = le::Load32(e + 28);
    w.offset = le::Load32(e + 32);
    w.bytes.assign(reinterpret_cast<const char*>(e + kEntryHeaderBytes), len);
    entries->push_back(std::move(w));
    at += kEntryHeaderBytes + len;
  }
  wal->offset_ = at;
  if (size < bytes) {
    // A log preallocated smaller (or cut short): grow it once, now.
    const std::string zeros(1 << 20, '\0');
    for (uint64_t z = size; z < bytes; z += zeros.size()) {
      RAMP_RETURN_IF_ERROR(
          wal->file_->Write(z, zeros.data(), std::min<uint64_t>(zeros.size(), bytes - z)));
    }
    RAMP_RETURN_IF_ERROR(wal->file_->Sync());
  }
  const uint64_t block = at / Env::kSyncWriteAlign * Env::kSyncWriteAlign;
  wal->tail_.assign(data.data() + block, at - block);
  wal->OpenSyncWrites(env, path);
  *out = std::move(wal);
  return Status::OK();
}

void Wal::OpenSyncWrites(Env* env, const std::string& path) {
  if (bytes_ % Env::kSyncWriteAlign != 0) return;
  Status st = env->OpenSyncWrites(path, &sync_file_);
  if (!st.ok()) {
    sync_file_.reset();
    RAMP_WARN("%s: %s: batches are written and then fdatasynced", path.c_str(),
              st.ToString().c_str());
  }
}

Status Wal::AppendSyncWrite() {
  constexpr uint64_t kAlign = Env::kSyncWriteAlign;
  const uint64_t start = offset_ / kAlign * kAlign;
  const uint64_t end = offset_ + buffer_.size();
  const size_t len = static_cast<size_t>((end + kAlign - 1) / kAlign * kAlign - start);
  if (len > staging_bytes_) {
    void* p = nullptr;
    if (posix_memalign(&p, kAlign, len) != 0) return Status::NoSpace("write-ahead log buffer");
    staging_.reset(static_cast<char*>(p));
    staging_bytes_ = len;
  }
  char* s = staging_.get();
  std::memcpy(s, tail_.data(), tail_.size());
  std::memcpy(s + tail_.size(), buffer_.data(), buffer_.size());
  std::memset(s + tail_.size() + buffer_.size(), 0, len - tail_.size() - buffer_.size());
  RAMP_RETURN_IF_ERROR(sync_file_->Write(start, s, len));
  const uint64_t last = end / kAlign * kAlign;
  tail_.assign(s + (last - start), end - last);
  return Status::OK();
}

Status Wal::WriteHeader() {
  uint8_t h[20];
  le::Store32(h, kWalMagic);
  le::Store32(h + 4, kWalVersion);
  le::Store64(h + 8, generation_);
  le::Store32(h + 16, record::Crc32c(h, 16));
  RAMP_RETURN_IF_ERROR(file_->Write(0, h, sizeof(h)));
  return file_->Sync();
}

Status Wal::Append(const std::vector<WalPatch>& entries) {
  buffer_.clear();
  for (const WalPatch& w : entries) {
    const size_t start = buffer_.size();
    buffer_.resize(start + kEntryHeaderBytes);
    auto* e = reinterpret_cast<uint8_t*>(buffer_.data() + start);
    le::Store32(e, kEntryMagic);
    le::Store64(e + 8, generation_);
    le::Store64(e + 16, w.partition.keyspace);
    le::Store32(e + 24, w.partition.bucket);
    le::Store32(e + 28, w.segment);
    le::Store32(e + 32, w.offset);
    le::Store32(e + 36, 0);
    le::Store32(e + 40, static_cast<uint32_t>(w.bytes.size()));
    buffer_.append(w.bytes);
    e = reinterpret_cast<uint8_t*>(buffer_.data() + start);
    le::Store32(e + 4, record::Crc32c(e + 8, kEntryHeaderBytes - 8 + w.bytes.size()));
  }
  if (buffer_.size() > room()) return Status::NoSpace("write-ahead log full (checkpoint first)");
  const auto t0 = std::chrono::steady_clock::now();
  if (sync_file_ != nullptr) {
    RAMP_RETURN_IF_ERROR(AppendSyncWrite());
  } else {
    RAMP_RETURN_IF_ERROR(file_->Write(offset_, buffer_.data(), buffer_.size()));
    RAMP_RETURN_IF_ERROR(file_->Sync());
  }
  sync_us_ += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  offset_ += buffer_.size();
  return Status::OK();
}

Status Wal::Reset() {
  ++generation_;
  RAMP_RETURN_IF_ERROR(WriteHeader());
  offset_ = kHeaderBytes;
  tail_.clear();
  return Status::OK();
}

}  // namespace ramp::store
