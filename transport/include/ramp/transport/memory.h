// Registered memory (DESIGN §4): memory a peer may read or write one-sided.
//
// Memory that peers may touch is allocated here (memfd-backed so the shm provider can map
// it into the peer, mmap-ed so verbs can register it). A registration names one buffer or
// many discrete buffers (an iovec list, paper 003's one-handle-for-many-buffers) under one
// handle; peers address it by offset in [0, length) as if the buffers were concatenated.
// Every access is checked against the handle's key, bounds and access rights.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ramp/status.h"

namespace ramp::transport {

enum Access : uint32_t {
  kAccessRead = 1u << 0,   // peers may read
  kAccessWrite = 1u << 1,  // peers may write
  kAccessReadWrite = kAccessRead | kAccessWrite,
};

// What a peer needs to address a registration: plain bytes, safe to put in a message.
struct RemoteRegion {
  uint64_t id = 0;      // registration number in the owner's Memory (0 = none)
  uint64_t key = 0;     // random secret drawn at registration; other keys are refused
  uint64_t length = 0;  // bytes addressable
  uint32_t access = 0;  // Access bits granted to peers
  uint32_t reserved = 0;
  bool valid() const { return id != 0; }
  bool operator==(const RemoteRegion&) const = default;
};
static_assert(sizeof(RemoteRegion) == 32);

// One contiguous piece of a registration as seen by its owner.
struct Span {
  uint8_t* data;
  uint64_t length;
};

// A memfd-backed mapping that peers can be given access to.
struct Segment {
  uint64_t id = 0;  // unique within the Memory
  int fd = -1;      // memfd (owned by Memory)
  uint8_t* base = nullptr;
  uint64_t length = 0;      // page-aligned
  uint32_t max_access = 0;  // the most any registration inside may grant
};

// A piece of a registration in segment coordinates: what the shm provider sends a peer.
struct SegmentPiece {
  uint64_t segment_id;
  uint64_t offset;  // within the segment
  uint64_t length;
};

class Memory {
 public:
  struct Options {
    // Entries the registration cache keeps before evicting the least recently used.
    size_t registration_cache_entries = 1024;
  };

  static std::shared_ptr<Memory> Create(const Options& options);
  static std::shared_ptr<Memory> Create() { return Create(Options()); }
  ~Memory();
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;

  // Allocates len bytes (rounded up to pages) of shareable, zeroed memory. max_access bounds
  // what registrations inside it may grant peers (a read-only segment is mapped read-only by
  // shm peers). The memory lives until the Memory is destroyed or Free is called.
  Status Allocate(size_t len, uint32_t max_access, uint8_t** out);
  // Frees an allocation; registrations inside it are removed. Peers that mapped it keep
  // their mapping (memfd reference) until they drop it, so a late one-sided access reads
  // stale but valid memory (readers verify what they read).
  Status Free(uint8_t* base);

  // Registers one buffer, which must lie inside one allocation.
  Status Register(void* ptr, size_t len, uint32_t access, RemoteRegion* out);
  // Registers many discrete buffers as one handle; offset 0 is iov[0].iov_base.
  Status RegisterV(const iovec* iov, int iovcnt, uint32_t access, RemoteRegion* out);
  Status Deregister(uint64_t id);

  // Registration cache: returns the handle of an identical earlier registration (same
  // buffers, same access) when it is still registered, otherwise registers and remembers
  // it, evicting (deregistering) the least recently used entry past capacity.
  Status RegisterCached(const iovec* iov, int iovcnt, uint32_t access, RemoteRegion* out);
  struct CacheStats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t evictions = 0;
  };
  CacheStats cache_stats() const;

  // Owner side: checks an access (key, bounds [offset, offset+len), rights) and returns the
  // spans that hold those bytes. PermissionDenied for a wrong key or missing right,
  // InvalidArgument for out-of-bounds, NotFound for an unknown id.
  Status Resolve(const RemoteRegion& handle, uint64_t offset, uint64_t len, uint32_t access,
                 std::vector<Span>* out) const;
  // Resolve that also hands out a reference keeping the resolved bytes mapped until it is
  // dropped: a provider copying on another thread (tcp responder) holds it so that a
  // concurrent Free cannot unmap memory under the copy.
  Status Resolve(const RemoteRegion& handle, uint64_t offset, uint64_t len, uint32_t access,
                 std::vector<Span>* out, std::shared_ptr<const void>* pin) const;
  // Owner side: the segment pieces of a registration (for providers that map segments).
  Status Describe(uint64_t id, RemoteRegion* handle, std::vector<SegmentPiece>* pieces) const;
  // Owner side: a segment by id (fd and size for passing to a peer).
  Status GetSegment(uint64_t segment_id, Segment* out) const;
  // The same, with a reference that keeps the fd open and the mapping alive while held
  // (a concurrent Free would otherwise close an fd that is about to be sent).
  Status GetSegment(uint64_t segment_id, Segment* out, std::shared_ptr<const void>* pin) const;
  // The allocation holding [ptr, ptr+len), with a reference as above (verbs registers local
  // buffers by allocation). NotFound when no single allocation holds the range.
  Status FindSegment(const void* ptr, size_t len, Segment* out,
                     std::shared_ptr<const void>* pin) const;
  // True when [ptr, ptr+len) lies inside one allocation.
  bool Contains(const void* ptr, size_t len) const;

 private:
  explicit Memory(const Options& options);
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ramp::transport
