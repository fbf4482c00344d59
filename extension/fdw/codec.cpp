// Datums <-> the bytes of a raw keyspace (PostgreSQL code; may ereport). bytea: the bytes as
// they are; text, varchar: text of the database encoding; other types: their text form.
#include "fdw/fdw.hpp"

namespace pgramp::fdw {

namespace {

bool IsRawText(Oid typid) {
  return typid == TEXTOID || typid == VARCHAROID;
}

// An input function's message quotes the whole value; a long one is cut.
char* TruncatedMessage(const char* message) {
  constexpr size_t kMax = 200;
  if (strlen(message) <= kMax) return pstrdup(message);
  return psprintf("%.*s...", static_cast<int>(kMax), message);
}

}  // namespace

char* EncodeDatum(Datum value, Oid typid, int* len) {
  const Oid base = getBaseType(typid);
  if (base == BYTEAOID || IsRawText(base)) {
    struct varlena* v = pg_detoast_datum_packed(reinterpret_cast<struct varlena*>(value));
    *len = static_cast<int>(VARSIZE_ANY_EXHDR(v));
    return VARDATA_ANY(v);
  }
  Oid output = InvalidOid;
  bool varlena = false;
  getTypeOutputInfo(typid, &output, &varlena);
  char* text = OidOutputFunctionCall(output, value);
  *len = static_cast<int>(strlen(text));
  return text;
}

bool KeyTypePushable(Oid typid) {
  switch (typid) {
    case TEXTOID:
    case VARCHAROID:
    case BYTEAOID:
    case INT2OID:
    case INT4OID:
    case INT8OID:
      return true;
    default:
      return false;
  }
}

char* KeyForMessage(const char* key, size_t len) {
  constexpr size_t kMax = 64;
  bool printable = true;
  for (size_t i = 0; i < len && printable; i++) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    printable = c >= 0x20 && c < 0x7f;
  }
  StringInfoData s;
  initStringInfo(&s);
  const size_t n = len < kMax ? len : kMax;
  if (printable) {
    appendStringInfoChar(&s, '\'');
    appendBinaryStringInfo(&s, key, static_cast<int>(n));
    appendStringInfoChar(&s, '\'');
  } else {
    appendStringInfoString(&s, "\\x");
    for (size_t i = 0; i < n; i++) {
      appendStringInfo(&s, "%02x", static_cast<unsigned char>(key[i]));
    }
  }
  if (n < len) appendStringInfo(&s, "... (%zu bytes)", len);
  return s.data;
}

Datum DecodeDatum(const char* data, size_t len, Form_pg_attribute att, Relation rel,
                  const char* key, size_t key_len) {
  const Oid base = getBaseType(att->atttypid);
  if (base == BYTEAOID) {
    bytea* b = static_cast<bytea*>(palloc(len + VARHDRSZ));
    SET_VARSIZE(b, len + VARHDRSZ);
    memcpy(VARDATA(b), data, len);
    return PointerGetDatum(b);
  }
  {
    // Text of the database encoding, without NUL bytes.
    if (memchr(data, '\0', len) != nullptr ||
        !pg_verify_mbstr(GetDatabaseEncoding(), data, static_cast<int>(len), true)) {
      ereport(ERROR, (errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
                      errmsg("value of column \"%s\" of foreign table \"%s\" is not valid %s text",
                             NameStr(att->attname), RelationGetRelationName(rel),
                             GetDatabaseEncodingName()),
                      errdetail("Key %s, %zu bytes.", KeyForMessage(key, key_len), len),
                      errhint("Declare the column as bytea to read the bytes as they are.")));
    }
  }
  if (IsRawText(base) && base == att->atttypid && att->atttypmod < 0) {
    return PointerGetDatum(cstring_to_text_with_len(data, static_cast<int>(len)));
  }
  // Any other type (and domains, varchar(n)): its input function, whose error is reported
  // with the column and the key.
  char* text = pnstrdup(data, len);
  Oid input = InvalidOid, ioparam = InvalidOid;
  getTypeInputInfo(att->atttypid, &input, &ioparam);
  MemoryContext caller = CurrentMemoryContext;
  Datum result = 0;
  PG_TRY();
  { result = OidInputFunctionCall(input, text, ioparam, att->atttypmod); }
  PG_CATCH();
  {
    MemoryContextSwitchTo(caller);
    ErrorData* edata = CopyErrorData();
    FlushErrorState();
    ereport(ERROR,
            (errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
             errmsg("value of column \"%s\" of foreign table \"%s\" does not decode as %s",
                    NameStr(att->attname), RelationGetRelationName(rel),
                    format_type_with_typemod(att->atttypid, att->atttypmod)),
             errdetail("Key %s: %s", KeyForMessage(key, key_len), TruncatedMessage(edata->message)),
             errhint("Declare the column with the type of what the keyspace's writers "
                     "store, or as bytea.")));
  }
  PG_END_TRY();
  return result;
}

}  // namespace pgramp::fdw
