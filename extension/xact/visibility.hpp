// Which of the transaction's own buffered writes a snapshot sees (remote rows are always
// the latest committed, read-atomic versions). Both access methods read through it.
#pragma once

#include "xact/write_buffer.hpp"

#include "boundary/pg.hpp"

namespace pgramp {

Visibility VisibilityOf(Snapshot snapshot);

}  // namespace pgramp
