//! `value_report(from, to)` and `value_report_daily(from, to)`: what the inference traffic was
//! worth beside what it cost (docs/design.md §10), from the `value_mapping` catalog objects.
//!
//! ```sql
//! select product_line, mapping, days_met, events, value, cost, roi
//! from value_report('2026-11-01', '2026-12-01') order by product_line, mapping nulls first;
//! ```
//!
//! Rules (`gpuledger_ledger::value`): every UTC day of the window, each mapping's metric is
//! measured over the requests its filters (`model`, `team` label, `namespace`) match; on days its
//! condition holds, those requests (or the SLO-met ones, `counts: slo_met_requests`) are business
//! events worth `value / per` each. `cost` is the requests' loaded cost as `unit_economics_daily`
//! prices them, on **every** day, met or not; `roi` = (value − cost) / cost (NULL without cost).
//!
//! `value_report` has one row per mapping, and one per product line and currency with `mapping`
//! NULL: its value is its mappings' sum, its cost that of the requests **any** of them matches,
//! each counted once. `value_report_daily` has one row per mapping and day: the metric
//! `measured`, whether the condition was met, and that day's events, value and cost.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, LazyLock};

use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use async_trait::async_trait;
use datafusion::catalog::Session;
use datafusion::common::Result as DfResult;
use datafusion::datasource::TableProvider;
use gpuledger_lake::tables::timestamp;
use gpuledger_ledger::unit_economics::{slo_met, succeeded};
use gpuledger_ledger::value::{DayTraffic, DayValue, ValueMappingSpec, evaluate, roi};

use super::support::{Computed, computed, declared_specs};
use super::unit_economics::{SourcesCall, costed, days, declared_slos, for_each_request};

/// `value_report(from, to)` and `value_report_daily(from, to)`.
pub fn table(call: SourcesCall) -> Arc<dyn TableProvider> {
    computed(ValueReportTable(call))
}

#[derive(Debug)]
struct ValueReportTable(SourcesCall);

static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let text = |name| Field::new(name, DataType::Utf8, true);
    let count = |name| Field::new(name, DataType::Int64, false);
    let number = |name| Field::new(name, DataType::Float64, true);
    Arc::new(Schema::new(vec![
        text("product_line"),
        text("mapping"),
        text("event"),
        text("currency"),
        count("days"),
        count("days_met"),
        count("requests"),
        count("events"),
        number("value"),
        number("cost"),
        number("roi"),
    ]))
});

static DAILY_SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
    let text = |name| Field::new(name, DataType::Utf8, true);
    let count = |name| Field::new(name, DataType::Int64, false);
    let number = |name| Field::new(name, DataType::Float64, true);
    Arc::new(Schema::new(vec![
        Field::new("day", timestamp(), false),
        text("product_line"),
        text("mapping"),
        text("metric"),
        number("measured"),
        Field::new("condition_met", DataType::Boolean, false),
        count("requests"),
        count("slo_met_requests"),
        count("events"),
        number("value"),
        text("currency"),
        number("cost"),
    ]))
});

/// One mapping's (or product line's) figures summed over days.
#[derive(Debug, Default)]
struct Total {
    days: i64,
    days_met: i64,
    requests: i64,
    events: i64,
    value: f64,
    cost: Option<f64>,
}

impl Total {
    fn add_cost(&mut self, cost: Option<f64>) {
        if let Some(cost) = cost {
            self.cost = Some(self.cost.unwrap_or(0.0) + cost);
        }
    }
}

/// One mapping on one day.
struct Daily<'a> {
    day: i64,
    mapping: &'a ValueMappingSpec,
    traffic: DayTraffic,
    value: DayValue,
}

#[async_trait]
impl Computed for ValueReportTable {
    fn schema(&self) -> SchemaRef {
        if self.0.daily {
            DAILY_SCHEMA.clone()
        } else {
            SCHEMA.clone()
        }
    }

    async fn batches(&self, state: &dyn Session) -> DfResult<Vec<RecordBatch>> {
        let mappings: Vec<ValueMappingSpec> = declared_specs(&self.0.sources.catalog).await?;
        let slos = declared_slos(&self.0.sources.catalog).await?;
        let mut daily = Vec::new();
        // (product line, currency) → the cost of the requests any of its mappings matched.
        let mut line_costs: BTreeMap<(&str, &str), Total> = BTreeMap::new();
        for (day, bounds) in days(&self.0.bounds) {
            let (_, mut costing) = costed(state, &self.0.sources, &slos, &bounds).await?;
            let mut traffic = vec![DayTraffic::default(); mappings.len()];
            for_each_request(state, &self.0.sources.token_usage, &bounds, |request| {
                let matched: Vec<usize> = (0..mappings.len())
                    .filter(|&i| mappings[i].matches(request))
                    .collect();
                if matched.is_empty() {
                    return;
                }
                let cost = costing.loaded_cost(request);
                let slo = slos.find(request.model, request.priority);
                let (ok, met) = (
                    succeeded(&request.outcome, slo),
                    slo_met(&request.outcome, slo),
                );
                let mut lines = BTreeSet::new();
                for i in matched {
                    traffic[i].add(request, ok, met, cost);
                    lines.insert((
                        mappings[i].product_line.as_str(),
                        mappings[i].currency.as_str(),
                    ));
                }
                for line in lines {
                    let total = line_costs.entry(line).or_default();
                    total.requests += 1;
                    total.add_cost(cost);
                }
            })
            .await?;
            for (mapping, traffic) in mappings.iter().zip(traffic) {
                let value = evaluate(mapping, &traffic);
                daily.push(Daily {
                    day,
                    mapping,
                    traffic,
                    value,
                });
            }
        }
        let batch = if self.0.daily {
            daily_batch(&daily)?
        } else {
            report_batch(&daily, line_costs)?
        };
        Ok(vec![batch])
    }
}

fn daily_batch(daily: &[Daily]) -> DfResult<RecordBatch> {
    fn text<'a>(rows: &'a [Daily], f: impl Fn(&'a Daily) -> &'a str) -> ArrayRef {
        Arc::new(rows.iter().map(|r| Some(f(r))).collect::<StringArray>())
    }
    let count = |f: fn(&Daily) -> i64| -> ArrayRef {
        Arc::new(daily.iter().map(f).collect::<Int64Array>())
    };
    let number = |f: fn(&Daily) -> Option<f64>| -> ArrayRef {
        Arc::new(daily.iter().map(f).collect::<Float64Array>())
    };
    let days: Vec<i64> = daily.iter().map(|d| d.day).collect();
    let columns = vec![
        Arc::new(TimestampMicrosecondArray::from(days).with_timezone("UTC")) as ArrayRef,
        text(daily, |d| &d.mapping.product_line),
        text(daily, |d| &d.mapping.name),
        text(daily, |d| &d.mapping.metric),
        number(|d| d.value.measured),
        Arc::new(
            daily
                .iter()
                .map(|d| Some(d.value.condition_met))
                .collect::<BooleanArray>(),
        ),
        count(|d| d.traffic.requests),
        count(|d| d.traffic.slo_met),
        count(|d| d.value.events),
        number(|d| Some(d.value.value)),
        text(daily, |d| &d.mapping.currency),
        number(|d| d.traffic.cost),
    ];
    Ok(RecordBatch::try_new(DAILY_SCHEMA.clone(), columns)?)
}

/// Per product line and currency (mapping NULL), then per mapping.
fn report_batch(
    daily: &[Daily],
    line_costs: BTreeMap<(&str, &str), Total>,
) -> DfResult<RecordBatch> {
    let mut per_mapping: BTreeMap<(&str, &str), (&ValueMappingSpec, Total)> = BTreeMap::new();
    let mut per_line = line_costs;
    let mut line_days: BTreeMap<(&str, &str), (BTreeSet<i64>, BTreeSet<i64>)> = BTreeMap::new();
    for d in daily {
        let m = d.mapping;
        let (_, total) = per_mapping
            .entry((&m.product_line, &m.name))
            .or_insert_with(|| (m, Total::default()));
        total.days += 1;
        total.days_met += i64::from(d.value.condition_met);
        total.requests += d.traffic.requests;
        total.events += d.value.events;
        total.value += d.value.value;
        total.add_cost(d.traffic.cost);
        let key = (m.product_line.as_str(), m.currency.as_str());
        let line = per_line.entry(key).or_default();
        line.events += d.value.events;
        line.value += d.value.value;
        let (days, met) = line_days.entry(key).or_default();
        days.insert(d.day);
        if d.value.condition_met {
            met.insert(d.day);
        }
    }
    for (key, (days, met)) in line_days {
        let line = per_line.entry(key).or_default();
        line.days = days.len() as i64;
        line.days_met = met.len() as i64;
    }
    let rows: Vec<(&str, Option<&str>, Option<&str>, &str, &Total)> = per_line
        .iter()
        .map(|((line, currency), total)| (*line, None, None, *currency, total))
        .chain(per_mapping.values().map(|(m, total)| {
            (
                m.product_line.as_str(),
                Some(m.name.as_str()),
                Some(m.event.as_str()),
                m.currency.as_str(),
                total,
            )
        }))
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(rows.iter().map(|r| Some(r.0)).collect::<StringArray>()),
        Arc::new(rows.iter().map(|r| r.1).collect::<StringArray>()),
        Arc::new(rows.iter().map(|r| r.2).collect::<StringArray>()),
        Arc::new(rows.iter().map(|r| Some(r.3)).collect::<StringArray>()),
        Arc::new(rows.iter().map(|r| r.4.days).collect::<Int64Array>()),
        Arc::new(rows.iter().map(|r| r.4.days_met).collect::<Int64Array>()),
        Arc::new(rows.iter().map(|r| r.4.requests).collect::<Int64Array>()),
        Arc::new(rows.iter().map(|r| r.4.events).collect::<Int64Array>()),
        Arc::new(
            rows.iter()
                .map(|r| Some(r.4.value))
                .collect::<Float64Array>(),
        ),
        Arc::new(rows.iter().map(|r| r.4.cost).collect::<Float64Array>()),
        Arc::new(
            rows.iter()
                .map(|r| roi(r.4.value, r.4.cost))
                .collect::<Float64Array>(),
        ),
    ];
    Ok(RecordBatch::try_new(SCHEMA.clone(), columns)?)
}
