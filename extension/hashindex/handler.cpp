// Index AM `ramp_hash`: the IndexAmRoutine (modelled on contrib/bloom's handler).
#include "hashindex/hashindex.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(ramp_hash_handler);
Datum ramp_hash_handler(PG_FUNCTION_ARGS) {
  using namespace pgramp::hashindex;
  IndexAmRoutine* am = makeNode(IndexAmRoutine);
  am->amstrategies = 1;  // equality
  am->amsupport = 1;     // extended hash function
  am->amoptsprocnum = 0;
  am->amcanorder = false;
  am->amcanorderbyop = false;
  am->amcanbackward = false;
  am->amcanunique = false;    // PostgreSQL reports UNIQUE as unsupported
  am->amcanmulticol = false;  // ... and multi-column indexes
  am->amoptionalkey = false;  // a scan needs the equality condition
  am->amsearcharray = false;
  am->amsearchnulls = false;
  am->amstorage = false;
  am->amclusterable = false;
  am->ampredlocks = false;
  am->amcanparallel = false;
  am->amcaninclude = false;
  am->amusemaintenanceworkmem = false;
  am->amparallelvacuumoptions = VACUUM_OPTION_NO_PARALLEL;
  am->amkeytype = InvalidOid;

  am->ambuild = Build;
  am->ambuildempty = BuildEmpty;
  am->aminsert = Insert;
  am->ambulkdelete = BulkDelete;
  am->amvacuumcleanup = VacuumCleanup;
  am->amcanreturn = nullptr;
  am->amcostestimate = CostEstimate;
  am->amoptions = Options;
  am->amproperty = nullptr;
  am->ambuildphasename = nullptr;
  am->amvalidate = Validate;
  am->amadjustmembers = nullptr;
  am->ambeginscan = BeginScan;
  am->amrescan = Rescan;
  am->amgettuple = GetTuple;
  am->amgetbitmap = GetBitmap;
  am->amendscan = EndScan;
  am->ammarkpos = nullptr;
  am->amrestrpos = nullptr;
  am->amestimateparallelscan = nullptr;
  am->aminitparallelscan = nullptr;
  am->amparallelrescan = nullptr;
  PG_RETURN_POINTER(am);
}
}
