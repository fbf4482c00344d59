// The slot type of ramp tables: TTSOpsMinimalTuple's callbacks, plus the writer of the row
// version for xmin/xmax/cmin/cmax (row_slot.hpp). Callbacks are called by PostgreSQL and
// call only PostgreSQL: plain C, no C++ objects (an ereport unwinds through them).
#include "rows/row_slot.hpp"

namespace pgramp {

namespace {

struct RowSlot {
  MinimalTupleTableSlot base;
  bool own;          // written by this transaction
  bool locked;       // own: by updating a row it had locked (xmax)
  CommandId cid;     // own: the command that wrote it
  uint64_t ts_time;  // committed: the version's timestamp
  uint64_t ts_client;
};

void SetCommitted(TupleTableSlot* slot, uint64_t ts_time, uint64_t ts_client) {
  RowSlot* r = reinterpret_cast<RowSlot*>(slot);
  r->own = false;
  r->locked = false;
  r->cid = FirstCommandId;
  r->ts_time = ts_time;
  r->ts_client = ts_client;
}

void Init(TupleTableSlot* slot) {
  TTSOpsMinimalTuple.init(slot);
  SetCommitted(slot, 0, 0);
}

void Clear(TupleTableSlot* slot) {
  TTSOpsMinimalTuple.clear(slot);
  SetCommitted(slot, 0, 0);
}

// A normal transaction id that is not one of this transaction's, from the version's
// timestamp (splitmix64's finalizer: every bit of it reaches the low 32 bits).
TransactionId CommittedXmin(uint64_t ts_time, uint64_t ts_client) {
  constexpr uint64_t kNormalIds = uint64_t{MaxTransactionId} - FirstNormalTransactionId + 1;
  uint64_t h = ts_time ^ (ts_client * 0x9E3779B97F4A7C15ull);
  h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
  h ^= h >> 31;
  for (;;) {
    const TransactionId xid = static_cast<TransactionId>(FirstNormalTransactionId + h % kNormalIds);
    if (!TransactionIdIsCurrentTransactionId(xid)) return xid;
    h++;
  }
}

// The transaction's xid, assigned now if it has none yet (ramp writes do not need one). A
// parallel worker cannot assign one: InvalidTransactionId (workers never see the leader's
// buffered writes anyway).
TransactionId OwnXid() {
  const TransactionId xid = GetTopTransactionIdIfAny();
  if (TransactionIdIsValid(xid) || IsInParallelMode()) return xid;
  return GetTopTransactionId();
}

Datum GetSysAttr(TupleTableSlot* slot, int attnum, bool* isnull) {
  const RowSlot* r = reinterpret_cast<const RowSlot*>(slot);
  *isnull = false;
  switch (attnum) {
    case MinTransactionIdAttributeNumber:
      if (!r->own) return TransactionIdGetDatum(CommittedXmin(r->ts_time, r->ts_client));
      return TransactionIdGetDatum(OwnXid());
    case MaxTransactionIdAttributeNumber:
      return TransactionIdGetDatum(r->own && r->locked ? OwnXid() : InvalidTransactionId);
    case MinCommandIdAttributeNumber:
    case MaxCommandIdAttributeNumber:
      return CommandIdGetDatum(r->own ? r->cid : FirstCommandId);
    default:
      ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                      errmsg("ramp tables have no system column %d", attnum)));
  }
  return Datum(0);
}

// TTSOpsMinimalTuple's copyslot stores with ExecStoreMinimalTuple, which refuses this type.
void CopySlot(TupleTableSlot* dst, TupleTableSlot* src) {
  MemoryContext old = MemoryContextSwitchTo(dst->tts_mcxt);
  MinimalTuple tuple = ExecCopySlotMinimalTuple(src);
  MemoryContextSwitchTo(old);
  StoreMinimalTupleInRowSlot(dst, tuple, true);
  if (IsRowSlot(src)) {
    const RowSlot* s = reinterpret_cast<const RowSlot*>(src);
    RowSlot* d = reinterpret_cast<RowSlot*>(dst);
    d->own = s->own;
    d->locked = s->locked;
    d->cid = s->cid;
    d->ts_time = s->ts_time;
    d->ts_client = s->ts_client;
  }
}

// A copy keeps the row's TID (its row id) in t_self, as a heap tuple's copy does: ANALYZE
// sorts its sample by t_self, and a column's correlation (which the planner's index scan
// costs use) is computed in that order. TTSOpsMinimalTuple's copy leaves t_self invalid.
HeapTuple CopyHeapTuple(TupleTableSlot* slot) {
  HeapTuple tuple = TTSOpsMinimalTuple.copy_heap_tuple(slot);
  tuple->t_self = slot->tts_tid;
  return tuple;
}

}  // namespace

// The callbacks that need nothing more are TTSOpsMinimalTuple's own (no extra call per row:
// scans deform every row). Initialized when the library loads, after PostgreSQL's.
extern const TupleTableSlotOps kRowSlotOps = {
    .base_slot_size = sizeof(RowSlot),
    .init = Init,
    .release = TTSOpsMinimalTuple.release,
    .clear = Clear,
    .getsomeattrs = TTSOpsMinimalTuple.getsomeattrs,
    .getsysattr = GetSysAttr,
    .materialize = TTSOpsMinimalTuple.materialize,
    .copyslot = CopySlot,
    .get_heap_tuple = nullptr,
    .get_minimal_tuple = TTSOpsMinimalTuple.get_minimal_tuple,
    .copy_heap_tuple = CopyHeapTuple,
    .copy_minimal_tuple = TTSOpsMinimalTuple.copy_minimal_tuple,
};

void StoreMinimalTupleInRowSlot(TupleTableSlot* slot, MinimalTuple tuple, bool should_free) {
  // What TTSOpsMinimalTuple does when it stores a tuple (execTuples.c).
  ExecClearTuple(slot);
  auto* m = reinterpret_cast<MinimalTupleTableSlot*>(slot);
  slot->tts_flags &= ~TTS_FLAG_EMPTY;
  slot->tts_nvalid = 0;
  m->off = 0;
  m->mintuple = tuple;
  m->minhdr.t_len = tuple->t_len + MINIMAL_TUPLE_OFFSET;
  m->minhdr.t_data =
      reinterpret_cast<HeapTupleHeader>(reinterpret_cast<char*>(tuple) - MINIMAL_TUPLE_OFFSET);
  if (should_free) slot->tts_flags |= TTS_FLAG_SHOULDFREE;
}

void MarkOwnVersion(TupleTableSlot* slot, CommandId cid, bool locked) {
  if (!IsRowSlot(slot)) return;
  RowSlot* r = reinterpret_cast<RowSlot*>(slot);
  r->own = true;
  r->locked = locked;
  r->cid = cid;
  r->ts_time = 0;
  r->ts_client = 0;
}

void MarkCommittedVersion(TupleTableSlot* slot, uint64_t ts_time, uint64_t ts_client) {
  if (IsRowSlot(slot)) SetCommitted(slot, ts_time, ts_client);
}

}  // namespace pgramp
