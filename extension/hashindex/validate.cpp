// amvalidate for ramp_hash operator classes (modelled on the rules of PostgreSQL's hash AM):
// strategy 1 (equality) only; support function 1 = extended hash (type, int8) → int8 for
// every type the family's operators use, so both sides of a cross-type = hash alike.
#include "hashindex/hashindex.hpp"

namespace pgramp::hashindex {

namespace {

// Like check_amproc_signature, plus the physically compatible functions the built-in hash
// opclasses use for types without a cast (date/hashint4, bool/hashchar, ...).
bool HashSignatureOk(Oid funcid, Oid type) {
  HeapTuple tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
  if (!HeapTupleIsValid(tuple)) elog(ERROR, "cache lookup failed for function %u", funcid);
  Form_pg_proc proc = reinterpret_cast<Form_pg_proc>(GETSTRUCT(tuple));
  bool ok =
      proc->prorettype == INT8OID && proc->pronargs == 2 && proc->proargtypes.values[1] == INT8OID;
  if (ok) {
    const Oid arg = proc->proargtypes.values[0];
    ok = arg == type || IsBinaryCoercible(type, arg) ||
         (funcid == F_HASHINT4EXTENDED && type == DATEOID) ||
         (funcid == F_TIMESTAMP_HASH_EXTENDED && type == TIMESTAMPTZOID) ||
         (funcid == F_HASHCHAREXTENDED && type == BOOLOID) ||
         (funcid == F_HASHVARLENAEXTENDED && type == BYTEAOID);
  }
  ReleaseSysCache(tuple);
  return ok;
}

}  // namespace

bool Validate(Oid opclass) {
  HeapTuple class_tuple = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclass));
  if (!HeapTupleIsValid(class_tuple))
    elog(ERROR, "cache lookup failed for operator class %u", opclass);
  Form_pg_opclass class_form = reinterpret_cast<Form_pg_opclass>(GETSTRUCT(class_tuple));
  const Oid family = class_form->opcfamily;
  const Oid intype = class_form->opcintype;
  const char* class_name = NameStr(class_form->opcname);

  HeapTuple family_tuple = SearchSysCache1(OPFAMILYOID, ObjectIdGetDatum(family));
  if (!HeapTupleIsValid(family_tuple))
    elog(ERROR, "cache lookup failed for operator family %u", family);
  const char* family_name =
      NameStr(reinterpret_cast<Form_pg_opfamily>(GETSTRUCT(family_tuple))->opfname);

  CatCList* operators = SearchSysCacheList1(AMOPSTRATEGY, ObjectIdGetDatum(family));
  CatCList* procs = SearchSysCacheList1(AMPROCNUM, ObjectIdGetDatum(family));
  bool result = true;
  List* hashable = NIL;

  for (int i = 0; i < procs->n_members; i++) {
    Form_pg_amproc proc = reinterpret_cast<Form_pg_amproc>(GETSTRUCT(&procs->members[i]->tuple));
    if (proc->amprocnum != 1) {
      ereport(INFO, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                     errmsg("operator family \"%s\" of access method ramp_hash contains function "
                            "%s with invalid support number %d",
                            family_name, format_procedure(proc->amproc), proc->amprocnum)));
      result = false;
      continue;
    }
    if (proc->amproclefttype != proc->amprocrighttype ||
        !HashSignatureOk(proc->amproc, proc->amproclefttype)) {
      ereport(INFO, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                     errmsg("operator family \"%s\" of access method ramp_hash contains function "
                            "%s with wrong signature for support number 1",
                            family_name, format_procedure(proc->amproc))));
      result = false;
      continue;
    }
    hashable = list_append_unique_oid(hashable, proc->amproclefttype);
  }

  for (int i = 0; i < operators->n_members; i++) {
    Form_pg_amop op = reinterpret_cast<Form_pg_amop>(GETSTRUCT(&operators->members[i]->tuple));
    if (op->amopstrategy != 1 || op->amoppurpose != AMOP_SEARCH || OidIsValid(op->amopsortfamily)) {
      ereport(INFO, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                     errmsg("operator family \"%s\" of access method ramp_hash contains operator "
                            "%s that is not an equality search operator (strategy 1)",
                            family_name, format_operator(op->amopopr))));
      result = false;
      continue;
    }
    if (!check_amop_signature(op->amopopr, BOOLOID, op->amoplefttype, op->amoprighttype)) {
      ereport(INFO, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                     errmsg("operator family \"%s\" of access method ramp_hash contains operator "
                            "%s with wrong signature",
                            family_name, format_operator(op->amopopr))));
      result = false;
    }
    if (!list_member_oid(hashable, op->amoplefttype) ||
        !list_member_oid(hashable, op->amoprighttype)) {
      ereport(INFO, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                     errmsg("operator family \"%s\" of access method ramp_hash lacks a support "
                            "function for operator %s",
                            family_name, format_operator(op->amopopr))));
      result = false;
    }
  }

  if (!list_member_oid(hashable, intype)) {
    ereport(INFO, (errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
                   errmsg("operator class \"%s\" of access method ramp_hash is missing support "
                          "function 1",
                          class_name)));
    result = false;
  }

  ReleaseCatCacheList(procs);
  ReleaseCatCacheList(operators);
  ReleaseSysCache(family_tuple);
  ReleaseSysCache(class_tuple);
  return result;
}

}  // namespace pgramp::hashindex
