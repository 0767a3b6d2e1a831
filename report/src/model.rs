//! The weekly report as data: what every format renders. Serialized as the JSON export, whose
//! schema is `docs/report.schema.json` (`SCHEMA_VERSION`). Figures are rounded to 6 decimals so
//! that the same data gives the same bytes whatever order a parallel sum added them in.

use std::collections::BTreeMap;

use serde::Serialize;

/// Bumped when a field changes meaning or goes away; new fields do not bump it.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WeeklyReport {
    pub schema_version: u32,
    /// ISO week, `YYYY-Www`.
    pub week: String,
    /// Monday (UTC), inclusive.
    pub from: String,
    /// The next Monday (UTC), exclusive.
    pub to: String,
    pub currency: String,
    /// What a reader must know before the figures, e.g. that the week has no data at all (an
    /// empty report must not read as a quiet, balanced week).
    pub warnings: Vec<String>,
    /// The week in a paragraph: its cost beside the week before's, per team.
    pub summary: Summary,
    /// What could be reclaimed, as actions with owners (`recommendations(from, to)`).
    pub recommendations: Recommendations,
    pub capacity: Capacity,
    pub utilization: Utilization,
    pub queue: Queue,
    pub training: Training,
    pub inference: Inference,
    pub tenants: Tenants,
    pub optimization: Optimization,
    pub balance: Balance,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// Everything the week cost: the teams' totals and unallocated GPU time (reserved,
    /// unexplained, fault), i.e. the ledger's accounted side.
    pub total_cost: f64,
    pub previous_total_cost: f64,
    /// total_cost − previous_total_cost.
    pub change: f64,
    /// change / previous_total_cost; null when the week before cost nothing.
    pub change_share: Option<f64>,
    /// Every team of either week, the largest change (either way) first.
    pub teams: Vec<TeamChange>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TeamChange {
    pub team: String,
    pub total_cost: f64,
    pub previous_total_cost: f64,
    pub change: f64,
    /// change / previous_total_cost; null for a team that cost nothing the week before.
    pub change_share: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Recommendations {
    /// What every action of the week stands for: its waste (allocated idle + unexplained), the
    /// same figure as `optimization.waste_cost`.
    pub total_cost: f64,
    /// How many actions there are in all.
    pub count: u64,
    /// The largest actions, at most [`TOP_RECOMMENDATIONS`].
    pub top: Vec<Recommendation>,
    /// The SQL that lists them all.
    pub query: String,
}

/// How many actions the report lists.
pub const TOP_RECOMMENDATIONS: usize = 5;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Recommendation {
    /// `allocated_idle` (a workload) or `unexplained_idle` (a node).
    pub kind: String,
    /// Who acts: the workload's team, or `platform` for a node's idle GPUs, which no team holds.
    pub owner: String,
    pub action: String,
    pub cluster: Option<String>,
    pub node: Option<String>,
    pub namespace: Option<String>,
    pub workload: Option<String>,
    pub gpu_hours: f64,
    pub cost: f64,
    pub cost_per_day: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Capacity {
    pub total_gpus: u64,
    /// Neither faulty nor in maintenance at any time of the week.
    pub available_gpus: u64,
    /// GPUs with any fault time in the week.
    pub faulty_gpus: u64,
    /// GPUs with any time reserved for `maintenance`.
    pub maintenance_gpus: u64,
    pub fault_gpu_hours: f64,
    /// Every GPU for every hour of the week.
    pub gpu_hours: f64,
    /// gpu_hours − fault − maintenance: what the fleet could run.
    pub available_gpu_hours: f64,
    pub maintenance_gpu_hours: f64,
    pub by_model: Vec<CapacityGroup>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CapacityGroup {
    pub gpu_model: String,
    /// The nodes' capacity type (`on_demand`, `spot`, …).
    pub flavor: String,
    pub gpus: u64,
    pub available_gpus: u64,
    pub faulty_gpus: u64,
    pub maintenance_gpus: u64,
    pub gpu_hours: f64,
    pub available_gpu_hours: f64,
    pub fault_gpu_hours: f64,
    pub maintenance_gpu_hours: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Utilization {
    pub allocated_gpu_hours: f64,
    pub busy_gpu_hours: f64,
    /// SM activity averaged over allocated time that has telemetry.
    pub sm_active: Option<f64>,
    /// Framebuffer used / (used + free), time-weighted over the GPU time whose readings had it
    /// (`gpu_hours.memory_used_share`, weighted by each row's seconds).
    pub memory_used_share: Option<f64>,
    /// Watts, time-weighted likewise (`gpu_hours.power_w`).
    pub power_w_avg: Option<f64>,
    pub energy_kwh: f64,
    /// The cost of all GPU time in the week.
    pub gpu_cost: f64,
    /// Efficiency: busy cost / (busy + allocated idle cost), the share of allocated GPU money
    /// that did work; null without allocated time.
    pub busy_cost_share: Option<f64>,
    /// `allocated_idle`, `reserved:<reason>` for each reason, `unexplained`, `fault`.
    pub idle: Vec<IdleClass>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct IdleClass {
    pub class: String,
    pub gpu_hours: f64,
    pub cost: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Queue {
    pub queued: u64,
    pub admitted: u64,
    /// Queued workloads of the week that were admitted, with their wait.
    pub waits_measured: u64,
    pub wait_p50_seconds: Option<f64>,
    pub wait_p95_seconds: Option<f64>,
    pub rejections: u64,
    pub preemptions: u64,
    pub evictions: u64,
    /// Admissions that borrowed quota from another queue (the admission's reason says so).
    pub borrowed_admissions: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Training {
    pub workloads: u64,
    pub runs: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub preempted: u64,
    /// Succeeded / ended runs.
    pub success_rate: Option<f64>,
    pub gpu_hours: f64,
    pub effective_gpu_hours: f64,
    pub cost: f64,
    pub failure_loss: f64,
    pub recompute_cost: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Inference {
    pub models: Vec<ModelWeeks>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelWeeks {
    pub model: String,
    pub week: Option<ModelFigures>,
    pub previous_week: Option<ModelFigures>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ModelFigures {
    pub requests: u64,
    pub slo_met_requests: u64,
    pub slo_met_tokens: u64,
    /// SLO-met tokens per second of the week.
    pub slo_met_tokens_per_second: f64,
    /// Loaded cost (direct + the team's shared share) of the serving workloads.
    pub cost: Option<f64>,
    pub cost_per_1m_slo_met_tokens: Option<f64>,
    pub slo_missed_cost: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Tenants {
    /// `configured`, or `not configured` when no team has a budget or a quota.
    pub limits: String,
    pub teams: Vec<TeamRow>,
    pub unattributed: Unattributed,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TeamRow {
    pub team: String,
    pub gpu_hours: f64,
    /// Busy + allocated idle.
    pub direct_cost: f64,
    pub shared_cost: f64,
    pub total_cost: f64,
    /// The monthly budget prorated to the week's days.
    pub budget: Option<f64>,
    /// total_cost − budget: positive is over budget.
    pub budget_deviation: Option<f64>,
    pub quota_gpus: Option<f64>,
    /// gpu_hours / (quota_gpus × 168 h).
    pub quota_used_share: Option<f64>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Unattributed {
    /// What the `unattributed` team pays, shared costs included.
    pub total_cost: f64,
    pub workloads: Vec<UnattributedWorkload>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct UnattributedWorkload {
    pub namespace: Option<String>,
    pub workload: Option<String>,
    pub gpu_hours: f64,
    /// Busy + allocated idle.
    pub cost: f64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Optimization {
    /// Allocated idle + unexplained: the idle someone could reclaim.
    pub waste_gpu_hours: f64,
    pub waste_cost: f64,
    pub previous_waste_gpu_hours: f64,
    pub previous_waste_cost: f64,
    /// Previous − this week: positive when idle was reclaimed.
    pub reclaimed_gpu_hours: f64,
    pub reclaimed_cost: f64,
    /// Net savings of spot nodes (`spot_savings`); null without spot nodes.
    pub spot_net_savings: Option<f64>,
    pub slo_met_share: Option<f64>,
    pub previous_slo_met_share: Option<f64>,
    pub slo_missed_cost: Option<f64>,
}

/// Both sides of the ledger for the week (`gpuledger ledger check`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Balance {
    pub billed: f64,
    pub manual: f64,
    pub rate_card: f64,
    pub expected: f64,
    pub accounted: f64,
    pub difference: f64,
    pub balanced: bool,
}

/// Budgets and quotas per team, filled by the caller (budget objects); none: "not configured".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TenantLimits {
    pub teams: BTreeMap<String, TeamLimit>,
}

impl TenantLimits {
    /// The monthly budgets declared for teams (`kind: budget` with a `team`); a team with several
    /// has their sum. Budgets on a namespace or cost center are not a team's, and quotas are not
    /// declared in the catalog, so they stay unset.
    pub async fn declared(lake: &gpuledger_lake::Lake) -> crate::error::Result<TenantLimits> {
        let mut limits = TenantLimits::default();
        let budgets = lake
            .catalog()
            .objects_of::<gpuledger_ledger::budget::BudgetSpec>()
            .await?;
        for budget in budgets.into_iter().map(|b| b.spec) {
            if let Some(team) = budget.team {
                let limit = limits.teams.entry(team).or_default();
                *limit.monthly_budget.get_or_insert(0.0) += budget.amount;
            }
        }
        Ok(limits)
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct TeamLimit {
    pub monthly_budget: Option<f64>,
    /// GPUs the team may hold at once.
    pub quota_gpus: Option<f64>,
}

/// A figure rounded to 6 decimals (and never -0).
pub fn r6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6 + 0.0
}
