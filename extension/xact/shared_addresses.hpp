// The GET* address cache that every backend of this PostgreSQL server shares (in its shared
// memory), so that a row address one backend learnt makes the next backend's lookup of that
// row one-sided. Needs pg_ramp in shared_preload_libraries (shared memory is sized when the
// server starts); otherwise each backend keeps its own cache.
#pragma once

#include <memory>

#include "ramp/address_cache.h"

namespace pgramp {

// From _PG_init: asks for the shared memory when the library is being preloaded.
void InstallSharedAddressCache();

// The shared cache, or null when pg_ramp was not preloaded (or ramp.address_cache_entries
// is 0).
std::shared_ptr<ramp::AddressCache> SharedAddressCache();

}  // namespace pgramp
