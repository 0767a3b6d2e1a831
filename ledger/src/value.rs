//! Value mapping (docs/design.md §10): a technical metric over a day and a condition on it → a business
//! event → a value per unit, e.g. "p95 latency ≤ 350 ms over a day → credit approvals → 1,240 USD
//! per 10,000 calls". Each UTC day, a mapping's metric is measured over the requests its filter
//! matches; on days the condition holds, those requests (or the SLO-met ones) are business events
//! worth `value / per` each. The traffic's cost is its unit-economics loaded cost on every day,
//! met or not: the service costs the same whether it earns or not.

use serde::{Deserialize, Serialize};

use crate::unit_economics::Request;

/// Metrics a mapping can measure over a day. Latency and TTFT percentiles are nearest-rank over
/// the requests that measured them.
pub const METRICS: [&str; 10] = [
    "p50_latency_ms",
    "p95_latency_ms",
    "p99_latency_ms",
    "p50_ttft_ms",
    "p95_ttft_ms",
    "p99_ttft_ms",
    "success_rate",
    "slo_met_share",
    "requests",
    "tokens",
];

/// What a mapping counts as business events on the days its condition holds.
pub const COUNTS: [&str; 2] = ["requests", "slo_met_requests"];

/// One `value_mapping` catalog object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValueMappingSpec {
    pub name: String,
    pub product_line: String,
    /// One of [`METRICS`], over a UTC day.
    pub metric: String,
    /// The condition: the metric at most and/or at least these.
    #[serde(default)]
    pub at_most: Option<f64>,
    #[serde(default)]
    pub at_least: Option<f64>,
    /// Which requests the mapping is about; each filter left out matches any.
    #[serde(default)]
    pub model: Option<String>,
    /// The request's own `team` label.
    #[serde(default)]
    pub team: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    /// The business event, e.g. `credit approvals`.
    pub event: String,
    /// One of [`COUNTS`].
    #[serde(default = "requests")]
    pub counts: String,
    /// `value` per `per` events.
    pub value: f64,
    #[serde(default = "one")]
    pub per: f64,
    #[serde(default = "crate::objects::default_currency")]
    pub currency: String,
}

fn requests() -> String {
    "requests".into()
}

fn one() -> f64 {
    1.0
}

impl ValueMappingSpec {
    pub fn matches(&self, request: &Request) -> bool {
        let filter = |wanted: &Option<String>, given: Option<&str>| {
            wanted.as_deref().is_none_or(|w| given == Some(w))
        };
        filter(&self.model, request.model)
            && filter(&self.team, request.team)
            && filter(&self.namespace, request.namespace)
    }

    /// Whether the condition holds for a measured value; never without a measurement.
    pub fn holds(&self, measured: Option<f64>) -> bool {
        measured.is_some_and(|m| {
            self.at_most.is_none_or(|max| m <= max) && self.at_least.is_none_or(|min| m >= min)
        })
    }

    /// The value of `events` business events.
    pub fn value_of(&self, events: i64) -> f64 {
        events as f64 * self.value / self.per
    }
}

/// A mapping's matching traffic over one day.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DayTraffic {
    pub requests: i64,
    pub succeeded: i64,
    pub slo_met: i64,
    pub tokens: i64,
    latencies: Vec<f64>,
    ttfts: Vec<f64>,
    /// The loaded cost of the requests that have one; `None` when none has.
    pub cost: Option<f64>,
}

impl DayTraffic {
    pub fn add(&mut self, request: &Request, succeeded: bool, slo_met: bool, cost: Option<f64>) {
        self.requests += 1;
        self.succeeded += i64::from(succeeded);
        self.slo_met += i64::from(slo_met);
        self.tokens += request.input_tokens.unwrap_or(0) + request.output_tokens.unwrap_or(0);
        self.latencies.extend(request.outcome.latency_ms);
        self.ttfts.extend(request.outcome.ttft_ms);
        if let Some(cost) = cost {
            self.cost = Some(self.cost.unwrap_or(0.0) + cost);
        }
    }

    /// The metric over the day; `None` when nothing measured it.
    pub fn metric(&self, metric: &str) -> Option<f64> {
        let share = |part: i64| (self.requests > 0).then(|| part as f64 / self.requests as f64);
        match metric {
            "p50_latency_ms" => percentile(&self.latencies, 0.50),
            "p95_latency_ms" => percentile(&self.latencies, 0.95),
            "p99_latency_ms" => percentile(&self.latencies, 0.99),
            "p50_ttft_ms" => percentile(&self.ttfts, 0.50),
            "p95_ttft_ms" => percentile(&self.ttfts, 0.95),
            "p99_ttft_ms" => percentile(&self.ttfts, 0.99),
            "success_rate" => share(self.succeeded),
            "slo_met_share" => share(self.slo_met),
            "requests" => Some(self.requests as f64),
            "tokens" => Some(self.tokens as f64),
            _ => None,
        }
    }
}

/// Nearest-rank percentile: the smallest value with at least `p` of the values at or below it.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

/// One mapping on one day.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DayValue {
    pub measured: Option<f64>,
    pub condition_met: bool,
    pub events: i64,
    pub value: f64,
}

pub fn evaluate(mapping: &ValueMappingSpec, day: &DayTraffic) -> DayValue {
    let measured = day.metric(&mapping.metric);
    let condition_met = mapping.holds(measured);
    let events = match (condition_met, mapping.counts.as_str()) {
        (false, _) => 0,
        (true, "slo_met_requests") => day.slo_met,
        (true, _) => day.requests,
    };
    DayValue {
        measured,
        condition_met,
        events,
        value: mapping.value_of(events),
    }
}

/// (value − cost) / cost; `None` without a positive cost.
pub fn roi(value: f64, cost: Option<f64>) -> Option<f64> {
    cost.filter(|c| *c > 0.0).map(|c| (value - c) / c)
}

#[cfg(test)]
mod tests;
