// Rows ↔ MinimalTuples. A stored row is [format byte 1][MinimalTuple bytes]; the bytes come
// back from the network, so they are checked before PostgreSQL deforms them.
#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "boundary/boundary.hpp"
#include "rows/row_slot.hpp"
#include "rows/tid.hpp"
#include "rows/tuple_codec.hpp"

namespace pgramp {

namespace {

constexpr char kFormatMinimalTuple = 1;

// A flat MinimalTuple of the slot's row: external (TOAST) and compressed values are fetched
// and decompressed, expanded objects flattened (PostgreSQL side).
MinimalTuple FormFlatTuple(TupleTableSlot* slot) {
  TupleDesc desc = slot->tts_tupleDescriptor;
  slot_getallattrs(slot);
  const int natts = desc->natts;
  Datum* values = static_cast<Datum*>(palloc(sizeof(Datum) * Max(natts, 1)));
  bool* isnull = static_cast<bool*>(palloc(sizeof(bool) * Max(natts, 1)));
  for (int i = 0; i < natts; i++) {
    values[i] = slot->tts_values[i];
    isnull[i] = slot->tts_isnull[i];
    Form_pg_attribute att = TupleDescAttr(desc, i);
    if (isnull[i] || att->attlen != -1) continue;
    struct varlena* v = reinterpret_cast<struct varlena*>(DatumGetPointer(values[i]));
    if (VARATT_IS_EXTERNAL(v) || VARATT_IS_COMPRESSED(v)) {
      values[i] = PointerGetDatum(detoast_attr(v));
    }
  }
  MinimalTuple tuple = heap_form_minimal_tuple(desc, values, isnull);
  pfree(values);
  pfree(isnull);
  return tuple;
}

// Checks the header of an untrusted MinimalTuple against the relation's descriptor.
bool PlausibleTuple(const char* bytes, size_t size, TupleDesc desc) {
  if (size < SizeofMinimalTupleHeader) return false;
  MinimalTupleData header;
  std::memcpy(&header, bytes, SizeofMinimalTupleHeader);
  if (header.t_len != size) return false;
  const int natts = HeapTupleHeaderGetNatts(&header);
  if (natts > desc->natts) return false;
  const size_t hoff = header.t_hoff;
  if (hoff < MINIMAL_TUPLE_OFFSET + SizeofMinimalTupleHeader) return false;
  const size_t data_offset = hoff - MINIMAL_TUPLE_OFFSET;
  if (data_offset > size) return false;
  if ((header.t_infomask & HEAP_HASNULL) != 0 &&
      offsetof(MinimalTupleData, t_bits) + BITMAPLEN(natts) > data_offset) {
    return false;
  }
  return true;
}

}  // namespace

std::string EncodeSlot(TupleTableSlot* slot) {
  // Rows of a COPY or INSERT (no TOAST pointer, no compressed value, not large): the tuple is
  // formed as heap_form_minimal_tuple forms it, but from the slot's own arrays into a buffer
  // kept from row to row (heap_fill_tuple aligns to absolute addresses: it is 8-byte
  // aligned), then copied once. Other rows go through FormFlatTuple (palloc'd).
  constexpr size_t kMaxDirectBytes = 64 * 1024;
  static std::vector<uint64_t> scratch;
  std::string out;
  size_t len = 0;
  const bool direct = PgCall([&] {
    TupleDesc desc = slot->tts_tupleDescriptor;
    slot_getallattrs(slot);
    const int natts = desc->natts;
    bool hasnull = false;
    for (int i = 0; i < natts; i++) {
      if (slot->tts_isnull[i]) {
        hasnull = true;
        continue;
      }
      if (TupleDescAttr(desc, i)->attlen != -1) continue;
      const auto* v = reinterpret_cast<struct varlena*>(DatumGetPointer(slot->tts_values[i]));
      if (VARATT_IS_EXTERNAL(v) || VARATT_IS_COMPRESSED(v)) return false;
    }
    const size_t hoff = MAXALIGN(SizeofMinimalTupleHeader + (hasnull ? BITMAPLEN(natts) : 0));
    const size_t data_len = heap_compute_data_size(desc, slot->tts_values, slot->tts_isnull);
    len = hoff + data_len;
    if (len > kMaxDirectBytes) return false;
    return true;
  });
  if (direct) {
    const size_t words = (len + 7) / 8;
    if (scratch.size() < words) scratch.resize(std::max<size_t>(words, 64));
    std::memset(scratch.data(), 0, words * 8);  // heap_form_minimal_tuple's palloc0
    auto* tuple = reinterpret_cast<MinimalTuple>(scratch.data());
    PgCall([&] {
      TupleDesc desc = slot->tts_tupleDescriptor;
      const int natts = desc->natts;
      bool hasnull = false;
      for (int i = 0; i < natts && !hasnull; i++) hasnull = slot->tts_isnull[i];
      const size_t hoff = MAXALIGN(SizeofMinimalTupleHeader + (hasnull ? BITMAPLEN(natts) : 0));
      tuple->t_len = static_cast<uint32>(len);
      HeapTupleHeaderSetNatts(tuple, natts);
      tuple->t_hoff = static_cast<uint8>(hoff + MINIMAL_TUPLE_OFFSET);
      heap_fill_tuple(desc, slot->tts_values, slot->tts_isnull,
                      reinterpret_cast<char*>(tuple) + hoff, len - hoff, &tuple->t_infomask,
                      hasnull ? tuple->t_bits : nullptr);
    });
    out.reserve(1 + len);
    out.push_back(kFormatMinimalTuple);
    out.append(reinterpret_cast<const char*>(tuple), len);
    return out;
  }
  MinimalTuple tuple = PgCall([&] { return FormFlatTuple(slot); });
  out.reserve(1 + tuple->t_len);
  out.push_back(kFormatMinimalTuple);
  out.append(reinterpret_cast<const char*>(tuple), tuple->t_len);
  PgCall([&] { pfree(tuple); });
  return out;
}

void StoreRow(TupleTableSlot* slot, Relation rel, uint64_t rowid, std::string_view encoded) {
  if (encoded.empty() || encoded[0] != kFormatMinimalTuple ||
      !PlausibleTuple(encoded.data() + 1, encoded.size() - 1, RelationGetDescr(rel))) {
    throw SqlError(
        ERRCODE_DATA_CORRUPTED,
        std::string("invalid row in ramp table \"") + RelationGetRelationName(rel) + "\"",
        "row id " + std::to_string(rowid) + ", " + std::to_string(encoded.size()) + " bytes");
  }
  const char* bytes = encoded.data() + 1;
  const size_t size = encoded.size() - 1;
  PgCall([&] {
    // The slot owns the tuple: allocate it in the slot's context, not the caller's (callers
    // such as ALTER TABLE's rewrite loop reset their per-tuple context between rows).
    MinimalTuple tuple = static_cast<MinimalTuple>(MemoryContextAlloc(slot->tts_mcxt, size));
    memcpy(tuple, bytes, size);
    if (IsRowSlot(slot)) {
      StoreMinimalTupleInRowSlot(slot, tuple, true);
    } else {
      ExecForceStoreMinimalTuple(tuple, slot, true);
    }
    slot->tts_tableOid = RelationGetRelid(rel);
    SetTid(&slot->tts_tid, rowid);
  });
}

bool TryStoreScannedRow(TupleTableSlot* slot, Relation rel, uint64_t rowid,
                        std::string_view encoded) noexcept {
  if (encoded.size() < 2 || encoded[0] != kFormatMinimalTuple) return false;
  const char* bytes = encoded.data() + 1;
  if ((slot->tts_ops != &TTSOpsMinimalTuple && !IsRowSlot(slot)) ||
      reinterpret_cast<uintptr_t>(bytes) % MAXIMUM_ALIGNOF != 0 ||
      !PlausibleTuple(bytes, encoded.size() - 1, RelationGetDescr(rel))) {
    return false;
  }
  // Cannot fail: the slot is a minimal-tuple slot (ExecStoreMinimalTuple's only error), and
  // clearing it frees only what it owns.
  MinimalTuple tuple = reinterpret_cast<MinimalTuple>(const_cast<char*>(bytes));
  if (IsRowSlot(slot)) {
    StoreMinimalTupleInRowSlot(slot, tuple, false);
  } else {
    ExecStoreMinimalTuple(tuple, slot, false);
  }
  slot->tts_tableOid = RelationGetRelid(rel);
  SetTid(&slot->tts_tid, rowid);
  return true;
}

void StoreScannedRow(TupleTableSlot* slot, Relation rel, uint64_t rowid, std::string_view encoded) {
  // Another slot kind, a value not aligned in place, or a row that is not plausible: the
  // general path (which reports a bad row).
  if (!TryStoreScannedRow(slot, rel, rowid, encoded)) StoreRow(slot, rel, rowid, encoded);
}

bool RowAttribute(Relation rel, std::string_view encoded, AttrNumber attnum, Datum* value) {
  if (encoded.empty() || encoded[0] != kFormatMinimalTuple ||
      !PlausibleTuple(encoded.data() + 1, encoded.size() - 1, RelationGetDescr(rel))) {
    throw SqlError(ERRCODE_DATA_CORRUPTED, std::string("invalid row in ramp table \"") +
                                               RelationGetRelationName(rel) + "\"");
  }
  const char* bytes = encoded.data() + 1;
  const size_t size = encoded.size() - 1;
  struct Result {
    bool isnull;
    Datum value;
  };
  Result r = PgCall([&] {
    MinimalTuple tuple = static_cast<MinimalTuple>(palloc(size));
    memcpy(tuple, bytes, size);
    HeapTupleData htup;
    htup.t_len = tuple->t_len + MINIMAL_TUPLE_OFFSET;
    htup.t_data =
        reinterpret_cast<HeapTupleHeader>(reinterpret_cast<char*>(tuple) - MINIMAL_TUPLE_OFFSET);
    ItemPointerSetInvalid(&htup.t_self);
    htup.t_tableOid = RelationGetRelid(rel);
    TupleDesc desc = RelationGetDescr(rel);
    Result out;
    out.value = heap_getattr(&htup, attnum, desc, &out.isnull);
    if (!out.isnull) {
      Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
      out.value = datumCopy(out.value, att->attbyval, att->attlen);
    }
    pfree(tuple);
    return out;
  });
  *value = r.value;
  return !r.isnull;
}

}  // namespace pgramp
