// Shared memory for the GET* address cache (see shared_addresses.hpp). The cache itself is
// engine code (ramp/address_cache.h): lock-free, and safe to lose or tear because every
// address is checked against the record it points at before a read uses it.
#include "xact/shared_addresses.hpp"

#include <algorithm>

#include "boundary/boundary.hpp"
#include "sqlapi/guc.hpp"

namespace pgramp {

namespace {

constexpr size_t kAlign = 64;  // the cache wants cache-line-aligned memory

shmem_request_hook_type previous_shmem_request = nullptr;
shmem_startup_hook_type previous_shmem_startup = nullptr;
void* shared_memory = nullptr;  // set in the postmaster; backends inherit it
size_t shared_bytes = 0;

// Entries of the cache. Default (-1): half as many bytes as shared_buffers, at least 512 Ki
// entries. Heap keeps the rows it reads in shared_buffers; ramp rows live on the servers,
// and what a point read of one needs locally is its address (a miss costs a request round
// trip instead of a one-sided read). The fixed 512 Ki entries of before held 6 % of TPC-H
// SF 1's rows: Q9's index lookups fell back to requests (6.9x heap; SF 1 in total 2.12x
// heap's time, 1.85x with every address cached). With the shared_buffers that a server
// holding such data is given, the cache grows with it.
size_t CacheEntries() {
  if (guc::address_cache_entries >= 0) return static_cast<size_t>(guc::address_cache_entries);
  constexpr size_t kMinEntries = size_t{1} << 19;
  constexpr size_t kEntryBytes = 64;
  const size_t from_buffers = static_cast<size_t>(NBuffers) * BLCKSZ / 2 / kEntryBytes;
  return std::min(std::max(kMinEntries, from_buffers), size_t{64} << 20);
}

size_t CacheBytes() {
  const size_t entries = CacheEntries();
  return entries > 0 ? ramp::SharedAddressCacheBytes(entries) : 0;
}

void RequestMemory() {
  if (previous_shmem_request != nullptr) previous_shmem_request();
  if (CacheBytes() > 0) RequestAddinShmemSpace(CacheBytes() + kAlign);
}

void StartupMemory() {
  if (previous_shmem_startup != nullptr) previous_shmem_startup();
  const size_t bytes = CacheBytes();
  if (bytes == 0) return;
  LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
  bool found = false;
  void* raw = ShmemInitStruct("pg_ramp address cache", bytes + kAlign, &found);
  auto* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(raw) + kAlign - 1) &
                                          ~uintptr_t{kAlign - 1});
  // A fresh segment (postmaster start, or re-initialization after a backend crash) starts
  // empty; the addresses are hints, nothing is lost.
  if (!found && ramp::AttachSharedAddressCache(aligned, bytes, true) == nullptr) aligned = nullptr;
  LWLockRelease(AddinShmemInitLock);
  shared_memory = aligned;
  shared_bytes = bytes;
}

}  // namespace

void InstallSharedAddressCache() {
  if (!process_shared_preload_libraries_in_progress) return;
  previous_shmem_request = shmem_request_hook;
  shmem_request_hook = RequestMemory;
  previous_shmem_startup = shmem_startup_hook;
  shmem_startup_hook = StartupMemory;
}

std::shared_ptr<ramp::AddressCache> SharedAddressCache() {
  static std::shared_ptr<ramp::AddressCache> cache;
  static bool attached = false;
  if (!attached && shared_memory != nullptr) {
    attached = true;
    cache = ramp::AttachSharedAddressCache(shared_memory, shared_bytes, false);
  }
  return cache;
}

}  // namespace pgramp
