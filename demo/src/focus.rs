//! The cluster's bill as a FOCUS 1.2 CSV export (`gpuledger ingest focus`), as AWS Data Exports
//! writes one: compute per node per hour (spot at the hour's market price below its list price),
//! and per day inter-AZ transfer, a NAT gateway, FSx for Lustre, S3 checkpoints, the EKS control
//! plane, the LLM gateway's load balancer and CloudWatch. On-premises nodes have no bill.
//!
//! Money is kept in whole micro-dollars, so the lines add up exactly to what the tests expect.

use chrono::{DateTime, Datelike, NaiveDate, Utc};

use crate::noise::draw;
use crate::scenario::{CLUSTER, Capacity, DAY, HOUR, Scenario};

pub const BILLING_ACCOUNT: &str = "210987654321";
pub const SUB_ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";

/// FOCUS columns, in the order written.
const COLUMNS: [&str; 36] = [
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "ContractedCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ProviderName",
    "PublisherName",
    "InvoiceIssuerName",
    "RegionId",
    "RegionName",
    "AvailabilityZone",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SkuId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
];

/// One billing line. Costs in micro-dollars.
#[derive(Debug, Clone, PartialEq)]
pub struct BillingLine {
    /// Seconds since the start: `[from, to)`.
    pub from: i64,
    pub to: i64,
    pub description: String,
    pub effective_micros: i64,
    pub list_micros: i64,
    /// `Standard` or `Dynamic` (spot).
    pub pricing_category: &'static str,
    pub quantity: f64,
    pub unit: &'static str,
    pub availability_zone: Option<&'static str>,
    pub resource_id: Option<String>,
    pub resource_name: Option<String>,
    pub resource_type: Option<&'static str>,
    pub service_category: &'static str,
    pub service_name: &'static str,
    pub sku: String,
    /// `(key, value)` pairs for `Tags`.
    pub tags: Vec<(&'static str, String)>,
}

/// Every billing line of the window.
pub fn billing_lines(scenario: &Scenario) -> Vec<BillingLine> {
    let seed = scenario.spec.seed;
    let scale = scenario.spec.gpus as f64 / 64.0;
    let mut lines = Vec::new();
    for (n, node) in scenario.nodes.iter().enumerate() {
        if node.role.capacity() == Capacity::OnPrem {
            continue;
        }
        let model = node.model();
        let list = model.list_micros_per_gpu_hour * node.gpus as i64;
        let spot = node.role.capacity() == Capacity::Spot;
        let phase = draw(seed, n as u64, 0xf0, 0.0, 1.0);
        for hour in 0..scenario.window_seconds() / HOUR {
            let effective = if spot {
                let wave = (std::f64::consts::TAU * (hour as f64 / 24.0 + phase)).sin();
                let factor = 0.31 + 0.07 * wave + draw(seed, n as u64, hour as u64, 0.0, 0.03);
                (list as f64 * factor).round() as i64
            } else {
                list
            };
            lines.push(BillingLine {
                from: hour * HOUR,
                to: (hour + 1) * HOUR,
                description: format!(
                    "{} {} Instance Hour",
                    if spot { "Spot" } else { "On Demand" },
                    model.instance_type
                ),
                effective_micros: effective,
                list_micros: list,
                pricing_category: if spot { "Dynamic" } else { "Standard" },
                quantity: 1.0,
                unit: "Hours",
                availability_zone: Some(node.availability_zone),
                resource_id: node.resource_id.clone(),
                resource_name: Some(node.name.clone()),
                resource_type: Some("Instance"),
                service_category: "Compute",
                service_name: "Amazon Elastic Compute Cloud",
                sku: model.instance_type.to_string(),
                tags: vec![
                    ("kubernetes_cluster", CLUSTER.to_string()),
                    ("node_group", node.role.group().to_string()),
                ],
            });
        }
    }
    for day in 0..scenario.spec.days as i64 {
        let mut daily = |description: &str,
                         quantity: f64,
                         unit: &'static str,
                         micros_per_unit: f64,
                         service: (&'static str, &'static str),
                         resource: Option<String>,
                         tags: Vec<(&'static str, String)>| {
            let cost = (quantity * micros_per_unit).round() as i64;
            lines.push(BillingLine {
                from: day * DAY,
                to: (day + 1) * DAY,
                description: description.to_string(),
                effective_micros: cost,
                list_micros: cost,
                pricing_category: "Standard",
                quantity,
                unit,
                availability_zone: None,
                resource_name: resource
                    .as_ref()
                    .map(|r| r.rsplit('/').next().unwrap_or(r).to_string()),
                resource_type: resource.as_ref().map(|_| "Resource"),
                resource_id: resource,
                service_category: service.0,
                service_name: service.1,
                sku: description
                    .split_whitespace()
                    .next()
                    .unwrap_or("SKU")
                    .to_string(),
                tags,
            });
        };
        let cluster_tag = || vec![("kubernetes_cluster", CLUSTER.to_string())];
        let gb =
            |low: f64, high: f64, c: u64| (draw(seed, day as u64, c, low, high) * scale).round();
        daily(
            "USE1-DataTransfer-Regional-Bytes inter-AZ transfer",
            gb(14_000.0, 26_000.0, 1),
            "GB",
            20_000.0,
            ("Networking", "AWS Data Transfer"),
            None,
            cluster_tag(),
        );
        daily(
            "USE1-NatGateway-Bytes NAT gateway data processed",
            gb(900.0, 1_600.0, 2),
            "GB",
            45_000.0,
            ("Networking", "Amazon Virtual Private Cloud"),
            Some(format!(
                "arn:aws:ec2:{REGION}:{SUB_ACCOUNT}:natgateway/nat-0demo{CLUSTER}"
            )),
            cluster_tag(),
        );
        daily(
            "USE1-FSxLustre-Storage persistent SSD 250 MB/s/TiB",
            (48_000.0 * scale).round(),
            "GB-Days",
            145_000.0 / 30.0,
            ("Storage", "Amazon FSx"),
            Some(format!(
                "arn:aws:fsx:{REGION}:{SUB_ACCOUNT}:file-system/fs-0demo{CLUSTER}"
            )),
            cluster_tag(),
        );
        daily(
            "USE1-TimedStorage-ByteHrs S3 Standard checkpoints",
            ((20_000.0 + 500.0 * day as f64) * scale).round(),
            "GB-Days",
            23_000.0 / 30.0,
            ("Storage", "Amazon Simple Storage Service"),
            Some(format!("arn:aws:s3:::{CLUSTER}-checkpoints")),
            vec![
                ("kubernetes_cluster", CLUSTER.to_string()),
                ("purpose", "checkpoints".into()),
            ],
        );
        daily(
            "USE1-AmazonEKS-Hours:perCluster EKS control plane",
            24.0,
            "Hours",
            100_000.0,
            ("Compute", "Amazon Elastic Kubernetes Service"),
            Some(format!(
                "arn:aws:eks:{REGION}:{SUB_ACCOUNT}:cluster/{CLUSTER}"
            )),
            vec![
                ("kubernetes_cluster", CLUSTER.to_string()),
                ("component", "control-plane".into()),
            ],
        );
        daily(
            "USE1-LoadBalancerUsage application load balancer",
            24.0,
            "Hours",
            225_000.0 * scale.max(1.0),
            ("Networking", "Elastic Load Balancing"),
            Some(format!(
                "arn:aws:elasticloadbalancing:{REGION}:{SUB_ACCOUNT}:loadbalancer/app/llm-gateway"
            )),
            vec![
                ("kubernetes_cluster", CLUSTER.to_string()),
                ("service", "llm-gateway".into()),
            ],
        );
        daily(
            "USE1-CW:MetricMonitorUsage CloudWatch metrics and logs",
            gb(380.0, 520.0, 3),
            "Metrics",
            30_000.0,
            ("Management and Governance", "AmazonCloudWatch"),
            None,
            cluster_tag(),
        );
    }
    lines
}

/// The lines as a FOCUS CSV export.
pub fn focus_csv(scenario: &Scenario, lines: &[BillingLine]) -> Vec<u8> {
    let start = scenario.spec.start_time();
    let mut text = COLUMNS.join(",");
    text.push('\n');
    for line in lines {
        let from = start + chrono::Duration::seconds(line.from);
        let to = start + chrono::Duration::seconds(line.to);
        let (period_start, period_end) = billing_period(from.date_naive());
        let tags = serde_json::Value::Object(
            line.tags
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone())))
                .collect(),
        )
        .to_string();
        let money = |micros: i64| format!("{}.{:06}", micros / 1_000_000, micros % 1_000_000);
        let unit_price = (line.list_micros as f64 / line.quantity).round() as i64;
        let fields: [String; 36] = [
            BILLING_ACCOUNT.into(),
            "gpuledger-demo".into(),
            "USD".into(),
            iso(period_start),
            iso(period_end),
            iso(from),
            iso(to),
            "Usage".into(),
            String::new(),
            line.description.clone(),
            "Usage-Based".into(),
            money(line.effective_micros),
            money(line.effective_micros),
            money(line.list_micros),
            money(line.effective_micros),
            money(unit_price),
            line.pricing_category.into(),
            format!("{}", line.quantity),
            line.unit.into(),
            format!("{}", line.quantity),
            line.unit.into(),
            "AWS".into(),
            "AWS".into(),
            "Amazon Web Services, Inc.".into(),
            REGION.into(),
            "US East (N. Virginia)".into(),
            line.availability_zone.unwrap_or_default().into(),
            line.resource_id.clone().unwrap_or_default(),
            line.resource_name.clone().unwrap_or_default(),
            line.resource_type.unwrap_or_default().into(),
            line.service_category.into(),
            line.service_name.into(),
            line.sku.clone(),
            SUB_ACCOUNT.into(),
            "ml-platform".into(),
            tags,
        ];
        let quoted: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        text.push_str(&quoted.join(","));
        text.push('\n');
    }
    text.into_bytes()
}

/// The calendar month a day is billed in: `[first of month, first of next month)`.
fn billing_period(day: NaiveDate) -> (DateTime<Utc>, DateTime<Utc>) {
    let first = day.with_day(1).expect("day 1");
    let next = first
        .checked_add_months(chrono::Months::new(1))
        .expect("in range");
    let midnight = |d: NaiveDate| d.and_hms_opt(0, 0, 0).expect("midnight").and_utc();
    (midnight(first), midnight(next))
}

fn iso(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests;
