// ramp_hash cost model: one request to one partition returns every entry of the value; the
// rows are then fetched by the table AM (costed by the planner from the table's size).
#include "hashindex/hashindex.hpp"

namespace pgramp::hashindex {

void CostEstimate(struct PlannerInfo* root, struct IndexPath* path, double loop_count,
                  Cost* startup_cost, Cost* total_cost, Selectivity* selectivity,
                  double* correlation, double* pages) {
  GenericCosts costs;
  memset(&costs, 0, sizeof(costs));
  genericcostestimate(root, path, loop_count, &costs);
  // The entries of a value are one remote request, whatever the index's local size says
  // (a ramp_hash index has no local pages): one random page per lookup, plus CPU per entry.
  // Costs are per lookup (the planner multiplies by loop_count).
  // Each entry comes with its row (the lookup prefetches the rows it names, so the table
  // AM's fetches that follow cost nothing more): kEntryRowCost per entry.
  // Without it, 600 entries cost 8.5 (4.5 more than one): TPC-H Q20 on ramp_hash indexes
  // ANDed two bitmap lookups, one of 600 entries, 736 times (2.7 s; heap 17 ms). It was a
  // tenth of ramp.row_fetch_cost (2.5 then); 0.15 (with row_fetch_cost at 1.5) brought that
  // plan back (SF 0.1 Q20: 948 ms against heap's 9.7), so it no longer follows the setting.
  constexpr double kEntryRowCost = 0.25;
  *startup_cost = 0;
  *total_cost = random_page_cost +
                costs.numIndexTuples * (cpu_index_tuple_cost + cpu_operator_cost + kEntryRowCost);
  *selectivity = costs.indexSelectivity;
  *correlation = 0;  // row ids are unrelated to values
  *pages = 1;
}

}  // namespace pgramp::hashindex
