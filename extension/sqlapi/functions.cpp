// SQL functions of schema ramp (sql/pg_ramp--1.0.sql).
#include <string>
#include <vector>

#include "ramp/client.h"
#include "ramp/keyspace_catalog.h"
#include "ramp/rebalance.h"
#include "ramp/transport/endpoint.h"

#include "sqlapi/guc.hpp"
#include "xact/session.hpp"
#include "xact/shared_addresses.hpp"
#include "xact/xact.hpp"

#include "boundary/boundary.hpp"
#include "catalog/keyspace_catalog.hpp"

namespace pgramp {

namespace {

Datum Text(const std::string& s) {
  return CStringGetTextDatum(s.c_str());
}

// Rows of ramp.cluster_status() for the seeds when no client could be opened: the cluster
// cannot be asked, but the user still sees which servers were tried and why they failed.
void UnreachableSeeds(ReturnSetInfo* rsinfo, const std::string& error) {
  std::vector<ramp::transport::Endpoint> seeds;
  if (guc::nodes != nullptr) {
    (void)ramp::transport::ParseEndpointList(guc::nodes, &seeds);
  }
  for (const auto& seed : seeds) {
    const std::string endpoint = seed.ToString();
    PgCall([&] {
      Datum values[9];
      bool nulls[9] = {true, false, false, false, true, true, true, true, true};
      values[1] = Text(endpoint);
      values[2] = BoolGetDatum(false);
      values[3] = Text(error);
      tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
    });
  }
}

}  // namespace

}  // namespace pgramp

extern "C" {

PG_FUNCTION_INFO_V1(ramp_cluster_status);
Datum ramp_cluster_status(PG_FUNCTION_ARGS) {
  using namespace pgramp;
  InitMaterializedSRF(fcinfo, 0);
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  Boundary([&] {
    Session& session = Session::Get();
    std::vector<ramp::ServerStatus> servers;
    try {
      session.Check(session.client().ClusterStatus(&servers), "reading the cluster status");
    } catch (const RampError& e) {
      if (e.status().Is(ramp::Status::Code::kCancelled)) throw;
      UnreachableSeeds(rsinfo, e.status().message());
      return;
    }
    for (const ramp::ServerStatus& s : servers) {
      PgCall([&] {
        Datum values[9];
        bool nulls[9] = {};
        values[0] = Int32GetDatum(static_cast<int32>(s.node));
        values[1] = Text(s.endpoints);
        values[2] = BoolGetDatum(s.reachable);
        values[3] = Text(s.error);
        nulls[3] = s.error.empty();
        values[4] = Int64GetDatum(static_cast<int64>(s.partitions));
        values[5] = Int64GetDatum(static_cast<int64>(s.keys));
        values[6] = Int64GetDatum(static_cast<int64>(s.bytes));
        values[7] = Int64GetDatum(static_cast<int64>(s.ops));
        values[8] = Int64GetDatum(static_cast<int64>(s.uptime_ms));
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
      });
    }
  });
  return static_cast<Datum>(0);
}

PG_FUNCTION_INFO_V1(ramp_partitions_raw);
Datum ramp_partitions_raw(PG_FUNCTION_ARGS) {
  using namespace pgramp;
  InitMaterializedSRF(fcinfo, 0);
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  Boundary([&] {
    Session& session = Session::Get();
    std::vector<ramp::PartitionStatus> partitions;
    session.Check(session.client().Partitions(&partitions), "reading the partition table");
    for (const ramp::PartitionStatus& p : partitions) {
      PgCall([&] {
        Datum values[9];
        bool nulls[9] = {};
        values[0] = Int64GetDatum(static_cast<int64>(p.id.keyspace));
        values[1] = Int32GetDatum(static_cast<int32>(p.id.bucket));
        values[2] = Int32GetDatum(static_cast<int32>(p.owner));
        values[3] = Int32GetDatum(static_cast<int32>(p.home));
        values[4] = Int64GetDatum(static_cast<int64>(p.epoch));
        values[5] = Int64GetDatum(static_cast<int64>(p.keys));
        values[6] = Int64GetDatum(static_cast<int64>(p.bytes));
        values[7] = Float8GetDatum(p.ops_per_sec);
        values[8] = BoolGetDatum(p.migrating);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
      });
    }
  });
  return static_cast<Datum>(0);
}

// Moves a partition (ramp.migrate_partition, which resolves the relation): superuser only.
PG_FUNCTION_INFO_V1(ramp_migrate_partition);
Datum ramp_migrate_partition(PG_FUNCTION_ARGS) {
  using namespace pgramp;
  const int64 keyspace = PG_GETARG_INT64(0);
  const int32 bucket = PG_GETARG_INT32(1);
  const int32 node = PG_GETARG_INT32(2);
  if (!superuser()) {
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("permission denied: only a superuser may migrate partitions")));
  }
  if (node < 0 || bucket < 0) {
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg(node < 0 ? "unknown node %d" : "unknown partition: bucket %d",
                           node < 0 ? node : bucket)));
  }
  Boundary([&] {
    Session& session = Session::Get();
    const ramp::PartitionId p{static_cast<ramp::KeyspaceId>(keyspace),
                              static_cast<uint32_t>(bucket)};
    session.Check(session.client().MigratePartition(p, static_cast<uint32_t>(node)),
                  "migrating partition " + p.ToString());
  });
  PG_RETURN_VOID();
}

// The rebalancer's plan (ramp.rebalance); with dry_run false the moves are made (superuser).
PG_FUNCTION_INFO_V1(ramp_rebalance);
Datum ramp_rebalance(PG_FUNCTION_ARGS) {
  using namespace pgramp;
  const bool dry_run = PG_GETARG_BOOL(0);
  const double threshold = PG_GETARG_FLOAT8(1);
  if (!dry_run && !superuser()) {
    ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                    errmsg("permission denied: only a superuser may move partitions"),
                    errhint("ramp.rebalance(dry_run => true) shows the plan.")));
  }
  if (!(threshold > 1.0)) {
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("threshold must be above 1 (max/mean load), not %g", threshold)));
  }
  InitMaterializedSRF(fcinfo, 0);
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  Boundary([&] {
    Session& session = Session::Get();
    ramp::RebalanceOptions o;
    o.threshold = threshold;
    ramp::RebalancePlan plan;
    session.Check(session.client().PlanRebalance(o, &plan), "planning the rebalance");
    for (const ramp::PlannedMove& m : plan.moves) {
      if (!dry_run) {
        session.Check(session.client().MigratePartition(m.id, m.to),
                      "migrating partition " + m.id.ToString());
      }
      PgCall([&] {
        Datum values[7];
        bool nulls[7] = {};
        values[0] = Int64GetDatum(static_cast<int64>(m.id.keyspace));
        values[1] = Int32GetDatum(static_cast<int32>(m.id.bucket));
        values[2] = Int32GetDatum(static_cast<int32>(m.from));
        values[3] = Int32GetDatum(static_cast<int32>(m.to));
        values[4] = Float8GetDatum(m.load);
        values[5] = Float8GetDatum(plan.imbalance_before);
        values[6] = Float8GetDatum(plan.imbalance_after);
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
      });
    }
  });
  return static_cast<Datum>(0);
}

// Migrations in flight and recently finished (ramp.migrations).
PG_FUNCTION_INFO_V1(ramp_migrations_raw);
Datum ramp_migrations_raw(PG_FUNCTION_ARGS) {
  using namespace pgramp;
  InitMaterializedSRF(fcinfo, 0);
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  Boundary([&] {
    Session& session = Session::Get();
    std::vector<ramp::MigrationStatus> moves;
    session.Check(session.client().Migrations(&moves), "reading the migrations");
    for (const ramp::MigrationStatus& m : moves) {
      PgCall([&] {
        Datum values[11];
        bool nulls[11] = {};
        values[0] = Int64GetDatum(static_cast<int64>(m.id.keyspace));
        values[1] = Int32GetDatum(static_cast<int32>(m.id.bucket));
        values[2] = Int32GetDatum(static_cast<int32>(m.home));
        values[3] = Int32GetDatum(static_cast<int32>(m.source));
        values[4] = Int32GetDatum(static_cast<int32>(m.target));
        values[5] = Text(m.phase);
        values[6] = BoolGetDatum(m.in_flight);
        values[7] = Int64GetDatum(static_cast<int64>(m.bytes_copied));
        values[8] = Int64GetDatum(static_cast<int64>(m.bytes_total));
        // Unix milliseconds to a PostgreSQL timestamp (microseconds since 2000-01-01).
        values[9] = TimestampTzGetDatum(
            static_cast<TimestampTz>(m.started_unix_ms) * 1000 -
            static_cast<TimestampTz>(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY);
        values[10] = Text(m.error);
        nulls[10] = m.error.empty();
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
      });
    }
  });
  return static_cast<Datum>(0);
}

// Removes from the cluster the keyspaces of dropped relations whose removal after commit
// failed (the rows ramp.keyspaces keeps with kind 'd'), the keyspaces this PostgreSQL server
// registered for databases that no longer exist, and those of this database that
// ramp.keyspaces does not know (DROP EXTENSION, aborted CREATE). Returns how many keyspaces
// were really removed (a live entry in the cluster's catalog, or data on the cluster).
PG_FUNCTION_INFO_V1(ramp_collect_garbage);
Datum ramp_collect_garbage(PG_FUNCTION_ARGS) {
  using namespace pgramp;
  const int32 removed = Boundary([&] { return static_cast<int32>(CollectClusterGarbage()); });
  PG_RETURN_INT32(removed);
}

// The GET* address cache this backend reads through: the one the server's backends share,
// or this backend's own (counted since its client opened).
PG_FUNCTION_INFO_V1(ramp_address_cache);
Datum ramp_address_cache(PG_FUNCTION_ARGS) {
  using namespace pgramp;
  const ramp::AddressCacheStats s = Boundary([&] {
    if (auto shared = SharedAddressCache(); shared != nullptr) return shared->Stats();
    const ramp::Client* client = Session::Get().client_if_any();
    return client != nullptr ? client->address_cache_stats() : ramp::AddressCacheStats{};
  });
  TupleDesc desc;
  if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE) {
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("ramp.address_cache() must be called where a record is expected")));
  }
  desc = BlessTupleDesc(desc);
  Datum values[7];
  bool nulls[7] = {};
  values[0] = BoolGetDatum(s.shared);
  values[1] = Int64GetDatum(static_cast<int64>(s.capacity));
  values[2] = Int64GetDatum(static_cast<int64>(s.lookups));
  values[3] = Int64GetDatum(static_cast<int64>(s.found));
  values[4] = Int64GetDatum(static_cast<int64>(s.hits));
  values[5] = Int64GetDatum(static_cast<int64>(s.fallbacks));
  values[6] = Int64GetDatum(static_cast<int64>(s.stores));
  PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

// The cluster's keyspace catalog (ramp/keyspace_catalog.h), as rampctl keyspaces shows it.
PG_FUNCTION_INFO_V1(ramp_cluster_keyspaces);
Datum ramp_cluster_keyspaces(PG_FUNCTION_ARGS) {
  using namespace pgramp;
  InitMaterializedSRF(fcinfo, 0);
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  Boundary([&] {
    Session& session = Session::Get();
    ramp::KeyspaceCatalog catalog(&session.client());
    std::vector<ramp::KeyspaceEntry> entries;
    session.Check(catalog.List(&entries), "reading the cluster's keyspace catalog");
    for (const ramp::KeyspaceEntry& e : entries) {
      PgCall([&] {
        Datum values[10];
        bool nulls[10] = {};
        values[0] = Int64GetDatum(static_cast<int64>(e.id));
        values[1] = Text(ramp::KeyspaceStateName(e.state));
        values[2] = CharGetDatum(e.kind);
        values[3] = Text(e.database);
        values[4] = Text(e.schema);
        values[5] = Text(e.relation);
        values[6] = Int64GetDatum(static_cast<int64>(e.system_id));
        values[7] = ObjectIdGetDatum(e.database_oid);
        values[8] =
            TimestampTzGetDatum(time_t_to_timestamptz(static_cast<pg_time_t>(e.created_ms / 1000)) +
                                static_cast<TimestampTz>(e.created_ms % 1000) * 1000);
        values[9] = Int32GetDatum(static_cast<int32>(e.buckets));
        tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
      });
    }
  });
  return static_cast<Datum>(0);
}

// Event trigger (sql_drop): relations were dropped; ramp.keyspaces is reconciled with
// pg_class at pre-commit and their keyspaces are removed from the cluster after commit.
PG_FUNCTION_INFO_V1(ramp_on_sql_drop);
Datum ramp_on_sql_drop(PG_FUNCTION_ARGS) {
  if (!CALLED_AS_EVENT_TRIGGER(fcinfo)) {
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("ramp.on_sql_drop() must be called as an event trigger")));
  }
  pgramp::Boundary([] { pgramp::Xact().catalog_changed = true; });
  PG_RETURN_NULL();
}
}
