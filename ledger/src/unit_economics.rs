//! Inference unit economics (docs/design.md §7): only effective output counts. A request is effective when
//! it succeeded **and** met its SLO; the GPU cost of the workload that served it is spread over its
//! traffic by token share and then divided by the SLO-met output only, so throughput that breaks
//! the TTFT target raises the cost per token instead of lowering it.
//!
//! How a request finds its cost:
//! - a request that names its `workload` is served by the ledger's `(namespace, workload)` with the
//!   same namespace (a request without a namespace matches only workloads without one);
//! - a request without a workload is served by the workloads of its `namespace` whose allocations
//!   carry its `model` label;
//! - each workload's cost in the window (busy + allocated idle GPU cost, `direct`), and that cost
//!   plus its team's shared cost in proportion to the team's direct cost (`loaded`, as
//!   `team_costs` spreads it), is spread over every row it served by input + output tokens (by
//!   requests when that traffic carries no tokens), so it counts once however requests found it;
//! - a request that finds no workload has no cost (NULL, never zero: it is not free).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Datelike, Timelike, Weekday};
use serde::{Deserialize, Serialize};

use crate::time::Micros;
use crate::usage::unit_cost;

/// Request priorities an SLO can name; `*` names any priority (and requests without one).
pub const PRIORITIES: [&str; 3] = ["online", "batch", "interactive"];
pub const ANY_PRIORITY: &str = "*";

/// Peak hours: 08:00–20:00 UTC, Monday to Friday.
pub const PEAK_HOURS: std::ops::Range<u32> = 8..20;

/// Targets for one model and priority (`slo` catalog objects).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SloSpec {
    pub model: String,
    /// One of [`PRIORITIES`] or [`ANY_PRIORITY`].
    pub priority: String,
    /// Time to first token, at most; no target when absent.
    #[serde(default)]
    pub ttft_ms: Option<f64>,
    /// End-to-end latency, at most; no target when absent.
    #[serde(default)]
    pub latency_ms: Option<f64>,
    /// Statuses that count as success.
    #[serde(default = "default_success_statuses")]
    pub success_statuses: BTreeSet<String>,
    /// The share of requests that must meet the targets (0–1), over a capacity-planning window;
    /// [`DEFAULT_OBJECTIVE`] when absent.
    #[serde(default)]
    pub objective: Option<f64>,
}

pub const DEFAULT_OBJECTIVE: f64 = 0.99;

impl SloSpec {
    pub fn objective(&self) -> f64 {
        self.objective.unwrap_or(DEFAULT_OBJECTIVE)
    }
}

fn default_success_statuses() -> BTreeSet<String> {
    BTreeSet::from(["success".to_string()])
}

/// What the gateway measured about one request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome<'a> {
    pub status: Option<&'a str>,
    pub ttft_ms: Option<f64>,
    pub latency_ms: Option<f64>,
}

/// Whether a request succeeded and met its SLO. A target without a measurement is not met: there
/// is no evidence it was. Without an SLO, success alone counts; a request without a status has not
/// succeeded.
pub fn slo_met(outcome: &Outcome, slo: Option<&SloSpec>) -> bool {
    let Some(slo) = slo else {
        return succeeded(outcome, None);
    };
    let within = |target: Option<f64>, measured: Option<f64>| match (target, measured) {
        (None, _) => true,
        (Some(target), Some(measured)) => measured <= target,
        (Some(_), None) => false,
    };
    succeeded(outcome, Some(slo))
        && within(slo.ttft_ms, outcome.ttft_ms)
        && within(slo.latency_ms, outcome.latency_ms)
}

/// Whether a request's status is a success status of its SLO (`success` without one).
pub fn succeeded(outcome: &Outcome, slo: Option<&SloSpec>) -> bool {
    match slo {
        Some(slo) => outcome
            .status
            .is_some_and(|s| slo.success_statuses.contains(s)),
        None => outcome.status == Some("success"),
    }
}

/// The declared SLOs, looked up by model and priority: an SLO for the request's priority wins over
/// the model's `*` SLO.
#[derive(Debug, Clone, Default)]
pub struct Slos(HashMap<String, HashMap<String, SloSpec>>);

impl Slos {
    pub fn new(specs: impl IntoIterator<Item = SloSpec>) -> Self {
        let mut by_model: HashMap<String, HashMap<String, SloSpec>> = HashMap::new();
        for spec in specs {
            by_model
                .entry(spec.model.clone())
                .or_default()
                .insert(spec.priority.clone(), spec);
        }
        Self(by_model)
    }

    pub fn find(&self, model: Option<&str>, priority: Option<&str>) -> Option<&SloSpec> {
        let by_priority = self.0.get(model?)?;
        priority
            .and_then(|p| by_priority.get(p))
            .or_else(|| by_priority.get(ANY_PRIORITY))
    }
}

/// Whether a time falls in [`PEAK_HOURS`] on a weekday (UTC).
pub fn is_peak(ts: Micros) -> bool {
    let Some(t) = DateTime::from_timestamp_micros(ts) else {
        return false;
    };
    !matches!(t.weekday(), Weekday::Sat | Weekday::Sun) && PEAK_HOURS.contains(&t.hour())
}

/// The prompt-length bucket of a request by input tokens (1k = 1,024 tokens, as context windows
/// are counted); `None` when the gateway did not count them.
pub fn prompt_bucket(input_tokens: Option<i64>) -> Option<&'static str> {
    Some(match input_tokens? {
        ..1_024 => "<1k",
        1_024..8_192 => "1k-8k",
        8_192..32_768 => "8k-32k",
        _ => ">=32k",
    })
}

/// The output-length bucket of a request by output tokens (1k = 1,024, as for prompts); `None`
/// when the gateway did not count them.
pub fn output_bucket(output_tokens: Option<i64>) -> Option<&'static str> {
    Some(match output_tokens? {
        ..256 => "<256",
        256..1_024 => "256-1k",
        1_024..4_096 => "1k-4k",
        _ => ">=4k",
    })
}

/// One gateway request, as `token_usage` holds it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Request<'a> {
    pub ts: Micros,
    pub team: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub workload: Option<&'a str>,
    pub model: Option<&'a str>,
    /// The build that answered and its weight format: rows split by them, SLOs and serving
    /// workloads are still found by `model`.
    pub model_version: Option<&'a str>,
    pub quantization: Option<&'a str>,
    pub priority: Option<&'a str>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cached_tokens: Option<i64>,
    pub cache_hit: Option<bool>,
    pub outcome: Outcome<'a>,
}

impl Request<'_> {
    fn tokens(&self) -> i64 {
        self.input_tokens.unwrap_or(0) + self.output_tokens.unwrap_or(0)
    }
}

/// The GPU cost one team's workload ran up in the window (busy + allocated idle).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadCost {
    pub team: String,
    pub namespace: Option<String>,
    pub workload: String,
    pub direct: f64,
}

/// A team's cost in the window as the journal has it: `direct` (busy + allocated idle) and the
/// `shared` cost amortized onto it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TeamCost {
    pub direct: f64,
    pub shared: f64,
}

/// What the ledger knows about the serving side of a window.
#[derive(Debug, Clone, Default)]
pub struct Serving {
    pub workloads: Vec<WorkloadCost>,
    /// `(namespace, workload, model)` from the allocations' `model` label.
    pub models: Vec<(Option<String>, String, String)>,
    pub teams: BTreeMap<String, TeamCost>,
}

/// How a request reaches the workloads that served it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Link {
    Workload {
        namespace: Option<String>,
        workload: String,
    },
    Model {
        namespace: Option<String>,
        model: String,
    },
}

/// The workloads that served one link's requests: indices into [`Serving::workloads`], sorted,
/// and the team charged for most of their cost (ties: the first by name).
#[derive(Debug, Clone, PartialEq)]
struct Served {
    workloads: Vec<usize>,
    team: String,
}

impl Serving {
    fn served(&self, link: &Link) -> Option<Served> {
        let serves = |cost: &WorkloadCost| match link {
            Link::Workload {
                namespace,
                workload,
            } => cost.namespace == *namespace && cost.workload == *workload,
            Link::Model { namespace, model } => {
                cost.namespace == *namespace
                    && self.models.iter().any(|(ns, wl, m)| {
                        *ns == cost.namespace && *wl == cost.workload && m == model
                    })
            }
        };
        let workloads: Vec<usize> = (0..self.workloads.len())
            .filter(|&i| serves(&self.workloads[i]))
            .collect();
        let mut by_team: BTreeMap<&str, f64> = BTreeMap::new();
        for &i in &workloads {
            *by_team.entry(&self.workloads[i].team).or_default() += self.workloads[i].direct;
        }
        let team = by_team
            .into_iter()
            .fold(None::<(&str, f64)>, |best, (team, cost)| match best {
                Some((_, best_cost)) if best_cost >= cost => best,
                _ => Some((team, cost)),
            })?
            .0
            .to_string();
        Some(Served { workloads, team })
    }

    /// Direct cost → fully loaded cost: 1 + the team's shared cost per unit of its direct cost.
    fn load_factor(&self, team: &str) -> f64 {
        match self.teams.get(team) {
            Some(t) if t.direct > 0.0 => 1.0 + t.shared / t.direct,
            _ => 1.0,
        }
    }

    /// `namespace/workload, …` for the workloads behind a row.
    fn names(&self, workloads: &[usize]) -> String {
        let names: BTreeSet<String> = workloads
            .iter()
            .map(|&i| {
                let cost = &self.workloads[i];
                match &cost.namespace {
                    Some(ns) => format!("{ns}/{}", cost.workload),
                    None => cost.workload.clone(),
                }
            })
            .collect();
        names.into_iter().collect::<Vec<_>>().join(", ")
    }
}

/// Request and token counts of one row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    pub requests: i64,
    pub slo_met_requests: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    /// Input + output tokens of the SLO-met requests.
    pub tokens_slo_met: i64,
}

impl Traffic {
    fn add(&mut self, request: &Request, met: bool) {
        self.requests += 1;
        self.input_tokens += request.input_tokens.unwrap_or(0);
        self.output_tokens += request.output_tokens.unwrap_or(0);
        self.cached_tokens += request.cached_tokens.unwrap_or(0);
        if met {
            self.slo_met_requests += 1;
            self.tokens_slo_met += request.tokens();
        }
    }

    pub fn slo_missed_requests(&self) -> i64 {
        self.requests - self.slo_met_requests
    }

    pub fn tokens(&self) -> i64 {
        self.input_tokens + self.output_tokens
    }
}

/// Cost per unit of effective output for a row's `cost` (NULL-able figures are `None`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UnitCosts {
    /// Cost / input + output tokens of SLO-met requests × 1e6.
    pub per_1m_tokens: Option<f64>,
    /// Cost / requests that succeeded and met the SLO.
    pub per_successful_request: Option<f64>,
    /// The cost of the SLO-missed traffic: its share of the row's tokens (of its requests when
    /// the row has no tokens).
    pub slo_missed: f64,
}

pub fn unit_costs(cost: f64, traffic: &Traffic) -> UnitCosts {
    let missed_share = if traffic.tokens() > 0 {
        (traffic.tokens() - traffic.tokens_slo_met) as f64 / traffic.tokens() as f64
    } else if traffic.requests > 0 {
        traffic.slo_missed_requests() as f64 / traffic.requests as f64
    } else {
        0.0
    };
    UnitCosts {
        per_1m_tokens: unit_cost(cost, traffic.tokens_slo_met as f64, 1e6),
        per_successful_request: unit_cost(cost, traffic.slo_met_requests as f64, 1.0),
        slo_missed: cost * missed_share,
    }
}

/// What a row is split by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    /// The team charged for the serving workloads; the request's own `team` label when it found
    /// none.
    pub team: Option<String>,
    pub model: Option<String>,
    pub model_version: Option<String>,
    pub quantization: Option<String>,
    pub priority: Option<String>,
    pub peak: bool,
    pub cache_hit: Option<bool>,
    pub prompt_bucket: Option<&'static str>,
    pub output_bucket: Option<&'static str>,
    /// The serving workloads (indices into [`Serving::workloads`]); empty when none served it.
    served_by: Vec<usize>,
}

/// One row of `unit_economics`.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub key: RowKey,
    /// The workloads whose cost the row carries, `namespace/workload, …`; `None` when the
    /// requests found none.
    pub served_by: Option<String>,
    pub traffic: Traffic,
    pub direct_cost: Option<f64>,
    pub loaded_cost: Option<f64>,
    /// Over the fully loaded cost; `None` without cost.
    pub unit_costs: Option<UnitCosts>,
}

/// Accumulates the requests of a window into rows, then costs them.
#[derive(Debug)]
pub struct UnitEconomics {
    slos: Slos,
    serving: Serving,
    served: HashMap<Link, Option<Served>>,
    rows: HashMap<RowKey, Traffic>,
}

impl UnitEconomics {
    pub fn new(slos: Slos, serving: Serving) -> Self {
        Self {
            slos,
            serving,
            served: HashMap::new(),
            rows: HashMap::new(),
        }
    }

    pub fn add(&mut self, request: &Request) {
        let owned = |s: Option<&str>| s.map(str::to_string);
        let (team, served_by) = match served(&mut self.served, &self.serving, request) {
            Some(served) => (Some(served.team), served.workloads),
            None => (owned(request.team), Vec::new()),
        };
        let key = RowKey {
            team,
            model: owned(request.model),
            model_version: owned(request.model_version),
            quantization: owned(request.quantization),
            priority: owned(request.priority),
            peak: is_peak(request.ts),
            cache_hit: request.cache_hit,
            prompt_bucket: prompt_bucket(request.input_tokens),
            output_bucket: output_bucket(request.output_tokens),
            served_by,
        };
        let met = slo_met(
            &request.outcome,
            self.slos.find(request.model, request.priority),
        );
        self.rows.entry(key).or_default().add(request, met);
    }

    /// The rows, ordered by their key.
    pub fn finish(self) -> Vec<Row> {
        self.into_costing().0
    }

    /// The rows, ordered by their key, and the costing that priced them (to price single
    /// requests the same way). Each workload's cost is spread over the rows it served by their
    /// tokens (by requests when none of them carries tokens), so it is counted once however its
    /// requests found it.
    pub fn into_costing(self) -> (Vec<Row>, Costing) {
        let mut served_traffic = vec![Traffic::default(); self.serving.workloads.len()];
        for (key, traffic) in &self.rows {
            for &i in &key.served_by {
                let total = &mut served_traffic[i];
                total.requests += traffic.requests;
                total.input_tokens += traffic.input_tokens;
                total.output_tokens += traffic.output_tokens;
            }
        }
        let costing = Costing {
            serving: self.serving,
            served: self.served,
            served_traffic,
        };
        let mut rows: Vec<Row> = self
            .rows
            .into_iter()
            .map(|(key, traffic)| {
                if key.served_by.is_empty() {
                    return Row {
                        key,
                        served_by: None,
                        traffic,
                        direct_cost: None,
                        loaded_cost: None,
                        unit_costs: None,
                    };
                }
                let (direct, loaded) = costing.cost(&key.served_by, &traffic);
                Row {
                    served_by: Some(costing.serving.names(&key.served_by)),
                    key,
                    traffic,
                    direct_cost: Some(direct),
                    loaded_cost: Some(loaded),
                    unit_costs: Some(unit_costs(loaded, &traffic)),
                }
            })
            .collect();
        rows.sort_by(|a, b| a.key.cmp(&b.key));
        (rows, costing)
    }
}

/// The workloads that served a request, through the cache of links already resolved.
fn served(
    cache: &mut HashMap<Link, Option<Served>>,
    serving: &Serving,
    request: &Request,
) -> Option<Served> {
    let owned = |s: Option<&str>| s.map(str::to_string);
    let link = match (request.workload, request.model) {
        (Some(workload), _) => Link::Workload {
            namespace: owned(request.namespace),
            workload: workload.to_string(),
        },
        (None, Some(model)) => Link::Model {
            namespace: owned(request.namespace),
            model: model.to_string(),
        },
        (None, None) => return None,
    };
    cache
        .entry(link)
        .or_insert_with_key(|link| serving.served(link))
        .clone()
}

/// How a window's serving cost was spread over its traffic, to price any part of that traffic.
#[derive(Debug)]
pub struct Costing {
    serving: Serving,
    served: HashMap<Link, Option<Served>>,
    /// Per workload, the traffic it served in the window.
    served_traffic: Vec<Traffic>,
}

impl Costing {
    /// `(direct, loaded)` cost of `traffic` served by `served_by`.
    fn cost(&self, served_by: &[usize], traffic: &Traffic) -> (f64, f64) {
        let (mut direct, mut loaded) = (0.0, 0.0);
        for &i in served_by {
            let workload = &self.serving.workloads[i];
            let cost = workload.direct * share_of(traffic, &self.served_traffic[i]);
            direct += cost;
            loaded += cost * self.serving.load_factor(&workload.team);
        }
        (direct, loaded)
    }

    /// The fully loaded cost of one request of the window, as its row was priced; `None` when
    /// no workload served it.
    pub fn loaded_cost(&mut self, request: &Request) -> Option<f64> {
        let served = served(&mut self.served, &self.serving, request)?;
        let mut traffic = Traffic::default();
        traffic.add(request, false);
        Some(self.cost(&served.workloads, &traffic).1)
    }
}

/// A row's share of what a workload served: by tokens, by requests when that traffic carries no
/// tokens.
fn share_of(row: &Traffic, served: &Traffic) -> f64 {
    if served.tokens() > 0 {
        row.tokens() as f64 / served.tokens() as f64
    } else {
        row.requests as f64 / served.requests as f64
    }
}

#[cfg(test)]
mod tests;
