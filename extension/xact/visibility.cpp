// Which of the transaction's own buffered writes a PostgreSQL snapshot sees.
#include "xact/visibility.hpp"

namespace pgramp {

ramp::Visibility VisibilityOf(Snapshot snapshot) {
  if (snapshot == nullptr) return ramp::Visibility{};
  if (snapshot->snapshot_type == SNAPSHOT_DIRTY) {
    // A dirty snapshot reports the in-progress transaction a caller must wait for in
    // xmin/xmax (heap's visibility routine resets them on every check). Ramp rows are never
    // "in progress" for other backends (writes appear at commit), so: nothing to wait for.
    // Left unset, unique checks and ON CONFLICT wait on garbage xids and retry forever.
    snapshot->xmin = InvalidTransactionId;
    snapshot->xmax = InvalidTransactionId;
    snapshot->speculativeToken = 0;
  }
  switch (snapshot->snapshot_type) {
    case SNAPSHOT_MVCC:
      return ramp::Visibility{snapshot->curcid, false};
    case SNAPSHOT_ANY:
      return ramp::Visibility{ramp::kAllCommands, true};
    default:
      // Self, dirty, non-vacuumable: every own write so far.
      return ramp::Visibility{ramp::kAllCommands, false};
  }
}

}  // namespace pgramp
