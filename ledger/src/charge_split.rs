//! Split cost allocation (FOCUS 1.3): each billed charge apportioned to where the ledger put
//! its money, so that a FOCUS consumer sees the journal's figures charge by charge.
//!
//! A node's line prices its GPUs over its period (`price.rs`): that part follows the node's
//! `gpu_hours` rows of the period, by the seconds of each row's classes (busy and allocated idle
//! to the owner's team and workload; reserved, unexplained and fault to no team). The node's
//! non-GPU part and every other line are shared items: spread over days in proportion to time
//! and over teams by the rule the journal uses, on the basis of that day's rows (`journal.rs`).
//!
//! A charge's parts carry weights that add to 1; the money of each part comes from splitting
//! the charge's amounts by them ([`Money::split_f64`]), so the parts of every amount add back to
//! the charge exactly. Per team they equal the journal's lines to within the rounding of its
//! rows (1e-12 per row).

use std::collections::{BTreeMap, HashMap};

use crate::amortize::payers;
use crate::build::{BillingItem, Node, NodeKey, line_node, line_parts};
use crate::gpu_hours::{GpuHour, Owner};
use crate::journal::{
    DailyBasis, SharedCostRule, UsageMeasures, daily_basis, day_weights, rule_for,
};
use crate::money::Money;
use crate::time::{MICROS_PER_DAY, MICROS_PER_HOUR, Micros, Span, floor_day};

/// Where a part of a charge went: the journal's bucket and, for a team's part, the team and
/// the workload.
#[derive(Debug, Clone, PartialEq)]
pub struct ChargePart {
    /// `None` for reserved, unexplained and fault time (no team holds it).
    pub team: Option<String>,
    pub namespace: Option<String>,
    pub workload: Option<String>,
    /// `direct`, `allocated_idle`, `shared`, `reserved:<reason>`, `unexplained` or `fault`.
    pub bucket: String,
    /// The shared-cost rule of a `shared` part.
    pub rule: Option<String>,
    /// The part's share of the charge; a charge's parts add to 1.
    pub weight: f64,
    /// The GPU-hours the part stands for (0 for a shared part).
    pub gpu_hours: f64,
}

/// A charge the ledger has not costed: the ledger is not built for a day it covers.
#[derive(Debug, Clone, PartialEq)]
pub struct NotBuilt {
    pub day: Micros,
}

/// Splits charges by the stored ledger of the days they cover.
pub struct ChargeSplitter<'a> {
    nodes: BTreeMap<NodeKey, &'a Node>,
    /// Each node's rows, in hour order.
    rows: HashMap<NodeKey, Vec<&'a GpuHour>>,
    rules: &'a [SharedCostRule],
    /// The basis of each day, from that day's rows alone (as a build of the day weighs).
    basis: BTreeMap<Micros, DailyBasis>,
}

impl<'a> ChargeSplitter<'a> {
    pub fn new(
        nodes: &'a [Node],
        rows: &'a [GpuHour],
        usage: &UsageMeasures,
        rules: &'a [SharedCostRule],
    ) -> Self {
        let mut by_node: HashMap<NodeKey, Vec<&GpuHour>> = HashMap::new();
        let mut by_day: BTreeMap<Micros, Vec<&GpuHour>> = BTreeMap::new();
        for row in rows {
            by_node
                .entry((row.cluster.clone(), row.node.clone()))
                .or_default()
                .push(row);
            by_day.entry(floor_day(row.hour)).or_default().push(row);
        }
        // A total order (the journal's), so that the parts, and the 1e-12 remainders of their
        // split, come out the same whatever order the stored rows are read in.
        for node_rows in by_node.values_mut() {
            node_rows.sort_by(|a, b| row_key(a).cmp(&row_key(b)));
        }
        let basis = by_day
            .into_iter()
            .map(|(day, rows)| {
                let usage_of_day: UsageMeasures = usage
                    .iter()
                    .map(|(measure, table)| {
                        let of_day = table
                            .range((day, String::new())..(day + 1, String::new()))
                            .map(|(k, v)| (k.clone(), *v))
                            .collect();
                        (measure.clone(), of_day)
                    })
                    .collect();
                (day, daily_basis(rows, &usage_of_day))
            })
            .collect();
        Self {
            nodes: nodes
                .iter()
                .map(|n| ((n.cluster.clone(), n.node.clone()), n))
                .collect(),
            rows: by_node,
            rules,
            basis,
        }
    }

    /// The parts of one charge, in a fixed order (GPU rows by hour, then shared parts by day and
    /// team); their weights add to 1. `days_built` says which days the ledger has costed.
    pub fn split(
        &self,
        line: &BillingItem,
        days_built: impl Fn(Micros) -> bool,
    ) -> Result<Vec<ChargePart>, NotBuilt> {
        for day in days(line.charge_period) {
            if !days_built(day) {
                return Err(NotBuilt { day });
            }
        }
        let parts = line_parts(line, line_node(line, &self.nodes));
        let mut out = Vec::new();
        let gpu_share = match &parts.gpu_price {
            Some(_) => line_node(line, &self.nodes).map_or(0.0, |n| n.gpu_cost_share),
            None => 0.0,
        };
        if let Some((node, price)) = &parts.gpu_price {
            let gpu_parts = self.gpu_parts(node, price.span);
            let total: f64 = gpu_parts.iter().map(|p| p.weight).sum();
            if total <= 0.0 {
                return Err(NotBuilt {
                    day: floor_day(price.span.start),
                });
            }
            out.extend(gpu_parts.into_iter().map(|p| ChargePart {
                weight: gpu_share * p.weight / total,
                ..p
            }));
        }
        if let Some(item) = &parts.shared {
            let rule = rule_for(item, self.rules);
            let no_basis = DailyBasis::default();
            for (day, day_fraction) in day_fractions(item.period) {
                let basis = self.basis.get(&day).unwrap_or(&no_basis);
                let teams = payers(&day_weights(&rule, basis, day));
                let total: f64 = teams.iter().map(|(_, w)| w).sum();
                for (team, w) in teams {
                    out.push(ChargePart {
                        team: Some(team),
                        namespace: None,
                        workload: None,
                        bucket: "shared".into(),
                        rule: Some(rule.name.clone()),
                        weight: (1.0 - gpu_share) * day_fraction * w / total,
                        gpu_hours: 0.0,
                    });
                }
            }
        }
        Ok(out)
    }

    /// The parts of a node's GPU time over `span`, weighted by each class's seconds in the
    /// part of the hour the span covers (unnormalised).
    fn gpu_parts(&self, node: &NodeKey, span: Span) -> Vec<ChargePart> {
        let mut parts = Vec::new();
        let Some(rows) = self.rows.get(node) else {
            return parts;
        };
        let first = rows.partition_point(|r| r.hour + MICROS_PER_HOUR <= span.start);
        for row in rows[first..].iter().take_while(|r| r.hour < span.end) {
            let hour = Span::new(row.hour, row.hour + MICROS_PER_HOUR);
            let covered = span.intersect(&hour).len() as f64 / MICROS_PER_HOUR as f64;
            let mut part = |bucket: String, seconds: f64, owned: bool| {
                if seconds > 0.0 {
                    let owner = row.owner.as_ref().filter(|_| owned);
                    parts.push(ChargePart {
                        team: owner.map(|o| o.team.clone()),
                        namespace: owner.and_then(|o| o.namespace.clone()),
                        workload: owner.and_then(|o| o.workload.clone()),
                        bucket,
                        rule: None,
                        weight: seconds * covered,
                        gpu_hours: seconds * covered / 3600.0,
                    });
                }
            };
            part("direct".into(), row.busy_seconds, true);
            part("allocated_idle".into(), row.allocated_idle_seconds, true);
            if let Some(reason) = &row.reserved_reason {
                part(format!("reserved:{reason}"), row.reserved_seconds, false);
            }
            part("unexplained".into(), row.unexplained_seconds, false);
            part("fault".into(), row.fault_seconds, false);
        }
        parts
    }
}

fn row_key(row: &GpuHour) -> (Micros, u32, &Option<Owner>, &Option<String>) {
    (row.hour, row.gpu_index, &row.owner, &row.reserved_reason)
}

/// The UTC days a period touches (its day, for an instant).
fn days(period: Span) -> impl Iterator<Item = Micros> {
    let first = floor_day(period.start);
    let end = if period.is_empty() {
        first + 1
    } else {
        period.end
    };
    (first..end).step_by(MICROS_PER_DAY as usize)
}

/// Each day of a period with the fraction of the period in it (an instant is whole on its day).
fn day_fractions(period: Span) -> Vec<(Micros, f64)> {
    if period.is_empty() {
        return vec![(floor_day(period.start), 1.0)];
    }
    days(period)
        .map(|day| {
            let in_day = period.intersect(&Span::new(day, day + MICROS_PER_DAY));
            (day, in_day.len() as f64 / period.len() as f64)
        })
        .collect()
}

/// Each part's exact share of `amount` (the parts add back to it).
pub fn split_amount(amount: Money, parts: &[ChargePart]) -> Vec<Money> {
    let weights: Vec<f64> = parts.iter().map(|p| p.weight).collect();
    amount.split_f64(&weights)
}

#[cfg(test)]
mod tests;
