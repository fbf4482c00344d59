// Which of the transaction's own buffered writes a snapshot sees (remote rows are always
// the latest committed, read-atomic versions). Both access methods read through it.
#pragma once

#include "ramp/write_batch.h"

#include "boundary/pg.hpp"

namespace pgramp {

ramp::Visibility VisibilityOf(Snapshot snapshot);

}  // namespace pgramp
