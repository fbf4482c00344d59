// ramp_hash entries: which group a value belongs to, and the maintenance the table AM asks
// for when rows go away.
#include <string>
#include <string_view>

#include "rows/keys.hpp"
#include "xact/xact.hpp"

#include "boundary/boundary.hpp"
#include "catalog/keyspace_catalog.hpp"
#include "hashindex/hashindex.hpp"
#include "rows/access_methods.hpp"
#include "rows/tuple_codec.hpp"

namespace pgramp::hashindex {

uint64 HashValue(Relation index, Oid value_type, Datum value) {
  FmgrInfo* proc;
  FmgrInfo other;
  const Oid opcintype = index->rd_opcintype[0];
  if (!OidIsValid(value_type) || value_type == opcintype) {
    proc = index_getprocinfo(index, 1, 1);
  } else {
    // Cross-type lookup (int4 column = int8 value): the family's hash function for the
    // value's own type. Hash opfamilies guarantee equal values hash alike across types.
    const Oid fn = get_opfamily_proc(index->rd_opfamily[0], value_type, value_type, 1);
    if (!OidIsValid(fn)) {
      elog(ERROR, "missing support function 1(%u,%u) in opfamily %u of index \"%s\"", value_type,
           value_type, index->rd_opfamily[0], RelationGetRelationName(index));
    }
    fmgr_info(fn, &other);
    proc = &other;
  }
  return DatumGetUInt64(
      FunctionCall2Coll(proc, index->rd_indcollation[0], value, Int64GetDatum(0)));
}

namespace {

// Calls fn(index) for every ramp_hash index of heap (opened, closed afterwards).
template <class Fn>
void ForEachRampHashIndex(Relation heap, Fn&& fn) {
  if (!heap->rd_rel->relhasindex) return;
  List* indexes = PgCall([&] { return RelationGetIndexList(heap); });
  ListCell* lc;
  foreach (lc, indexes) {
    const Oid oid = lfirst_oid(lc);
    Relation index = PgCall([&] { return index_open(oid, RowExclusiveLock); });
    if (IsRampHashIndex(index)) fn(index);
    PgCall([&] { index_close(index, NoLock); });
  }
  PgCall([&] { list_free(indexes); });
}

}  // namespace

}  // namespace pgramp::hashindex

namespace pgramp {

bool IsRampHashIndex(Relation index) {
  return index->rd_indam != nullptr && index->rd_indam->aminsert == hashindex::Insert;
}

bool HasRampHashIndexes(Relation heap) {
  bool found = false;
  hashindex::ForEachRampHashIndex(heap, [&](Relation) { found = true; });
  return found;
}

void DeleteEntriesOfRow(Relation heap, uint64_t rowid, std::string_view encoded_row, CommandId cid,
                        bool remote) {
  const ramp::SubTxnId sub = GetCurrentSubTransactionId();
  hashindex::ForEachRampHashIndex(heap, [&](Relation index) {
    const AttrNumber attnum = index->rd_index->indkey.values[0];
    Datum value;
    if (attnum <= 0 || !RowAttribute(heap, encoded_row, attnum, &value)) return;  // NULL
    const uint64 hash = PgCall([&] { return hashindex::HashValue(index, InvalidOid, value); });
    const ramp::KeyspaceRef ks = RelationKeyspace(index);
    Xact().writes.Delete(ks, ramp::EntryKey{hash, rowid}, cid, sub, remote, nullptr);
  });
}

}  // namespace pgramp
