//! Table functions over the ledger for arbitrary windows, each in its own module:
//! `team_costs(from, to)`, `idle_summary(from, to)`, `recommendations(from, to)`,
//! `unit_economics(from, to)` and
//! `unit_economics_daily(from, to)`, `training_economics(from, to)`, `spot_savings(from, to)`,
//! `value_report(from, to)` and `value_report_daily(from, to)`,
//! `focus_allocated(from, to)` (the FOCUS 1.3 allocation export),
//! `inference_capacity(model, peak_rps, redundancy)`, `gpu_fit(gpus)` and `budget_status(at)`. `from` is inclusive and `to` exclusive;
//! both take a date (`'2026-11-02'`), a timestamp or a timestamp string.

mod budget_status;
mod capacity;
mod focus_allocated;
mod idle_summary;
mod recommendations;
mod spot_savings;
mod support;
mod team_costs;
mod training_economics;
mod unit_economics;
mod value_report;

use std::sync::Arc;

use datafusion::datasource::TableProvider;
use datafusion::prelude::SessionContext;

pub use budget_status::BudgetStatusFunction;
pub use capacity::{GpuFit, InferenceCapacity};
pub use focus_allocated::FocusAllocated;
pub use idle_summary::IdleSummary;
pub use recommendations::Recommendations;
pub use spot_savings::SpotSavings;
pub use team_costs::TeamCosts;
pub use training_economics::{TrainingEconomics, TrainingRunsMemo};
pub use unit_economics::{SourcesCall, SourcesFunction, UnitEconomicsSources};

pub(crate) use support::no_money;

/// Registers every table function of this module, reading the given lake tables (and, for the
/// SLOs of `unit_economics`, the catalog).
pub fn register_all(ctx: &SessionContext, sources: UnitEconomicsSources) {
    ctx.register_udtf(
        "team_costs",
        Arc::new(TeamCosts {
            gpu_hours: Arc::clone(&sources.gpu_hours),
            cost_entries: Arc::clone(&sources.cost_entries),
        }),
    );
    ctx.register_udtf(
        "idle_summary",
        Arc::new(IdleSummary {
            gpu_hours: Arc::clone(&sources.gpu_hours),
        }),
    );
    ctx.register_udtf(
        "budget_status",
        Arc::new(BudgetStatusFunction {
            catalog: sources.catalog.clone(),
        }),
    );
    ctx.register_udtf(
        "recommendations",
        Arc::new(Recommendations {
            gpu_hours: Arc::clone(&sources.gpu_hours),
        }),
    );
    let computed_per_request: [(&'static str, fn(SourcesCall) -> Arc<dyn TableProvider>); 2] = [
        ("unit_economics", unit_economics::table),
        ("value_report", value_report::table),
    ];
    for (name, table) in computed_per_request {
        for daily in [false, true] {
            let function = SourcesFunction {
                name,
                sources: sources.clone(),
                daily,
                table,
            };
            ctx.register_udtf(&function.name(), Arc::new(function));
        }
    }
    ctx.register_udtf(
        "focus_allocated",
        Arc::new(FocusAllocated {
            catalog: sources.catalog.clone(),
        }),
    );
    ctx.register_udtf(
        "training_economics",
        Arc::new(TrainingEconomics {
            gpu_hours: Arc::clone(&sources.gpu_hours),
            scheduler_events: Arc::clone(&sources.scheduler_events),
        }),
    );
    ctx.register_udtf(
        "inference_capacity",
        Arc::new(InferenceCapacity {
            sources: sources.clone(),
        }),
    );
    ctx.register_udtf(
        "gpu_fit",
        Arc::new(GpuFit {
            sources: sources.clone(),
        }),
    );
    ctx.register_udtf(
        "spot_savings",
        Arc::new(SpotSavings {
            gpu_hours: Arc::clone(&sources.gpu_hours),
            billing_lines: Arc::clone(&sources.billing_lines),
            scheduler_events: Arc::clone(&sources.scheduler_events),
            catalog: sources.catalog.clone(),
        }),
    );
}
