//! Provider-native bills read as FOCUS: an AWS Cost and Usage Report (legacy CUR, CSV; the
//! `lineItem/…` column names) and an Azure Enterprise Agreement cost export (CSV). Each record is
//! translated into the FOCUS columns it has a meaning for, then goes through the same FOCUS rules
//! as a FOCUS export (`rows`), so the two land alike: exact numbers, one file per (day, billing
//! account, billing period) and a re-delivery of a period replacing the earlier one.
//!
//! The mapping follows the FinOps Foundation's focus_converters rules (AWS) and Microsoft's
//! "Convert cost data to FOCUS" guide (Azure), except where they contradict FOCUS 1.x; each such
//! place says so (docs/ingest.md has the whole table). A rejection names the native column a
//! value came from (`lineItem/UnblendedCost`, not `BilledCost`), and every native column that
//! has no FOCUS meaning lands, when it has a value, in `extra_columns` under its own name.

use std::borrow::Cow;
use std::collections::HashMap;

use chrono::{Days, NaiveDate};
use serde_json::{Map, Value as Json};

use crate::error::IngestError;

use super::values::parse_number;

/// A provider-native billing export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Native {
    /// AWS Cost and Usage Report, legacy CSV (`lineItem/UnblendedCost`, …).
    AwsCur,
    /// Azure Enterprise Agreement cost details export (`CostInBillingCurrency`, …).
    AzureEa,
}

impl Native {
    fn describe(self) -> &'static str {
        match self {
            Native::AwsCur => "an AWS Cost and Usage Report (legacy CUR)",
            Native::AzureEa => "an Azure Enterprise Agreement (EA) cost export",
        }
    }

    /// Columns without which no line has a cost in time or a restatement scope; the `|` names
    /// alternatives.
    fn required(self) -> &'static [&'static str] {
        match self {
            Native::AwsCur => &[
                "lineItem/UsageStartDate",
                "lineItem/UsageEndDate",
                "lineItem/UnblendedCost",
                "lineItem/LineItemType",
                "bill/PayerAccountId",
                "bill/BillingPeriodStartDate",
            ],
            Native::AzureEa => &[
                "Date",
                "CostInBillingCurrency",
                "BillingAccountId|BillingProfileId",
                "BillingPeriodStartDate",
                "BillingCurrencyCode|BillingCurrency",
            ],
        }
    }

    /// The native columns the translation reads; the others go to `extra_columns`.
    fn consumed(self) -> &'static [&'static str] {
        match self {
            Native::AwsCur => &[
                "bill/PayerAccountId",
                "bill/BillingPeriodStartDate",
                "bill/BillingPeriodEndDate",
                "bill/InvoicingEntity",
                "bill/InvoiceId",
                "lineItem/UsageAccountId",
                "lineItem/UsageAccountName",
                "lineItem/LineItemType",
                "lineItem/UsageStartDate",
                "lineItem/UsageEndDate",
                "lineItem/ProductCode",
                "lineItem/UsageType",
                "lineItem/AvailabilityZone",
                "lineItem/UsageAmount",
                "lineItem/CurrencyCode",
                "lineItem/UnblendedCost",
                "lineItem/NetUnblendedCost",
                "lineItem/LineItemDescription",
                "lineItem/LegalEntity",
                "lineItem/ResourceId",
                "product/ProductName",
                "product/region",
                "product/location",
                "product/sku",
                "product/PurchaseOption",
                "pricing/RateCode",
                "pricing/RateId",
                "pricing/currency",
                "pricing/publicOnDemandCost",
                "pricing/publicOnDemandRate",
                "pricing/term",
                "pricing/unit",
                "reservation/EffectiveCost",
                "reservation/ReservationARN",
                "reservation/TotalReservedUnits",
                "reservation/UnusedAmortizedUpfrontFeeForBillingPeriod",
                "reservation/UnusedRecurringFee",
                "savingsPlan/SavingsPlanARN",
                "savingsPlan/SavingsPlanEffectiveCost",
                "savingsPlan/TotalCommitmentToDate",
                "savingsPlan/UsedCommitment",
            ],
            Native::AzureEa => &[
                "BillingAccountId",
                "BillingAccountName",
                "BillingProfileId",
                "BillingProfileName",
                "BillingCurrencyCode",
                "BillingCurrency",
                "BillingPeriodStartDate",
                "BillingPeriodEndDate",
                "Date",
                "ChargeType",
                "Frequency",
                "PricingModel",
                "ProductName",
                "CostInBillingCurrency",
                "Quantity",
                "UnitOfMeasure",
                "PayGPrice",
                "UnitPrice",
                "ResourceLocation",
                "MeterCategory",
                "MeterId",
                "MeterName",
                "SubscriptionId",
                "SubscriptionName",
                "ResourceId",
                "ResourceName",
                "PublisherName",
                "AvailabilityZone",
                "benefitId",
                "benefitName",
                "ReservationId",
                "ReservationName",
                "Tags",
            ],
        }
    }
}

/// Native columns read into FOCUS and kept in `extra_columns` as well: the product code names
/// the service as analysts filter on it (`AmazonS3`), beside its ServiceCategory.
const KEPT_AS_WELL: &[&str] = &["lineItem/ProductCode"];

/// The FOCUS columns a native record is translated into, in this order.
const OUTPUT: &[&str] = &[
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
    "ContractedUnitPrice",
    "PricingQuantity",
    "PricingUnit",
    "PricingCategory",
    "PricingCurrency",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ProviderName",
    "PublisherName",
    "InvoiceIssuerName",
    "InvoiceId",
    "ServiceCategory",
    "ServiceName",
    "ResourceId",
    "ResourceName",
    "RegionId",
    "RegionName",
    "AvailabilityZone",
    "SkuId",
    "SkuPriceId",
    "SkuMeter",
    "SubAccountId",
    "SubAccountName",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountCategory",
    "CommitmentDiscountType",
    "CommitmentDiscountStatus",
    "Tags",
];

/// AWS `lineItem/ProductCode` → FOCUS ServiceCategory, for the services a GPU platform's bill
/// carries; any other code lands with no category (shared-cost rules can still match
/// `service_name`).
const AWS_SERVICE_CATEGORIES: &[(&str, &str)] = &[
    ("AmazonEC2", "Compute"),
    ("AmazonEKS", "Compute"),
    ("AmazonECS", "Compute"),
    ("AmazonECR", "Compute"),
    ("AWSLambda", "Compute"),
    ("AmazonSageMaker", "AI and Machine Learning"),
    ("AmazonBedrock", "AI and Machine Learning"),
    ("AmazonS3", "Storage"),
    ("AmazonEFS", "Storage"),
    ("AmazonFSx", "Storage"),
    ("AWSBackup", "Storage"),
    ("AmazonVPC", "Networking"),
    ("AWSDataTransfer", "Networking"),
    ("AmazonCloudFront", "Networking"),
    ("AmazonRoute53", "Networking"),
    ("AWSELB", "Networking"),
    ("AmazonRDS", "Databases"),
    ("AmazonDynamoDB", "Databases"),
    ("AWSGlue", "Analytics"),
    ("AmazonAthena", "Analytics"),
    ("AmazonCloudWatch", "Management and Governance"),
    ("AWSCloudTrail", "Management and Governance"),
    ("AWSConfig", "Management and Governance"),
    ("awskms", "Security"),
    ("AWSSecretsManager", "Security"),
    ("AWSQueueService", "Integration"),
    ("AmazonSNS", "Integration"),
    ("AmazonStates", "Integration"),
    ("AWSIoT", "Internet of Things"),
    ("AWSCloudShell", "Developer Tools"),
    ("AWSMigrationHubRefactorSpaces", "Migration"),
];

/// Azure `MeterCategory` → FOCUS ServiceCategory, as for AWS.
const AZURE_SERVICE_CATEGORIES: &[(&str, &str)] = &[
    ("Virtual Machines", "Compute"),
    ("Azure Kubernetes Service", "Compute"),
    ("Container Instances", "Compute"),
    ("Container Registry", "Compute"),
    ("Functions", "Compute"),
    ("Azure Machine Learning", "AI and Machine Learning"),
    ("Cognitive Services", "AI and Machine Learning"),
    ("Azure OpenAI", "AI and Machine Learning"),
    ("Storage", "Storage"),
    ("Virtual Network", "Networking"),
    ("Bandwidth", "Networking"),
    ("Load Balancer", "Networking"),
    ("Azure DNS", "Networking"),
    ("VPN Gateway", "Networking"),
    ("SQL Database", "Databases"),
    ("Azure Cosmos DB", "Databases"),
    ("Event Hubs", "Integration"),
    ("Service Bus", "Integration"),
    ("Azure Data Factory v2", "Integration"),
    ("Azure Monitor", "Management and Governance"),
    ("Log Analytics", "Management and Governance"),
    ("Key Vault", "Security"),
];

/// How one native header is read.
pub(super) struct Translation {
    native: Native,
    /// Each column of [`Native::consumed`] the header has → its position (matched ignoring
    /// case, once, so that reading a record allocates nothing per value).
    position: HashMap<&'static str, usize>,
    /// Native columns with no FOCUS meaning, landed in `extra_columns` under their name.
    passthrough: Vec<usize>,
    /// AWS `resourceTags/<key>` columns: (position, tag key).
    tag_columns: Vec<(usize, String)>,
    native_headers: Vec<String>,
}

/// One translated record: a value per FOCUS column of [`Translation::headers`], and the native
/// column(s) each came from, which a rejection names.
pub(super) struct Translated<'a> {
    pub(super) fields: Vec<Option<Cow<'a, str>>>,
    pub(super) labels: Vec<Cow<'static, str>>,
}

impl Translation {
    /// Reads `headers` as `native`, or says which columns it lacks.
    pub(super) fn new(
        native: Native,
        headers: &[String],
        origin: &str,
    ) -> Result<Self, IngestError> {
        let headers: Vec<String> = headers
            .iter()
            .map(|h| h.trim().trim_start_matches('\u{feff}').to_string())
            .collect();
        let find = |name: &str| headers.iter().position(|h| h.eq_ignore_ascii_case(name));
        let position: HashMap<&'static str, usize> = native
            .consumed()
            .iter()
            .filter_map(|&name| Some((name, find(name)?)))
            .collect();
        let missing: Vec<&str> = native
            .required()
            .iter()
            .filter(|names| !names.split('|').any(|n| find(n).is_some()))
            .copied()
            .collect();
        if !missing.is_empty() {
            return Err(IngestError::Format {
                origin: origin.to_string(),
                reason: format!(
                    "not {}: missing columns {}",
                    native.describe(),
                    missing.join(", ")
                ),
            });
        }
        let mut passthrough = Vec::new();
        let mut tag_columns = Vec::new();
        for (i, header) in headers.iter().enumerate() {
            let is = |names: &[&str]| names.iter().any(|n| header.eq_ignore_ascii_case(n));
            if native == Native::AwsCur && header.to_lowercase().starts_with("resourcetags/") {
                let key = &header["resourceTags/".len()..];
                tag_columns.push((i, key.strip_prefix("user:").unwrap_or(key).to_string()));
            } else if (!is(native.consumed()) || is(KEPT_AS_WELL)) && find(header) == Some(i) {
                passthrough.push(i);
            }
        }
        Ok(Self {
            native,
            position,
            passthrough,
            tag_columns,
            native_headers: headers,
        })
    }

    /// The FOCUS header the translated records follow: [`OUTPUT`], then the passed-through
    /// native columns under their own names.
    pub(super) fn headers(&self) -> Vec<String> {
        OUTPUT
            .iter()
            .map(ToString::to_string)
            .chain(
                self.passthrough
                    .iter()
                    .map(|&i| self.native_headers[i].clone()),
            )
            .collect()
    }

    /// One native record (`fields` in native header order, `None` for null) as FOCUS, or the
    /// native column and reason that keep it from being read at all.
    pub(super) fn record<'a>(
        &self,
        fields: &[Option<&'a str>],
    ) -> Result<Translated<'a>, (String, String)> {
        let row = Row {
            translation: self,
            fields,
        };
        let mut out = Out::new();
        match self.native {
            Native::AwsCur => aws_cur(&row, &mut out),
            Native::AzureEa => azure_ea(&row, &mut out)?,
        }
        for &i in &self.passthrough {
            out.fields
                .push(fields[i].filter(|t| !t.is_empty()).map(Cow::Borrowed));
            out.labels.push(Cow::Owned(self.native_headers[i].clone()));
        }
        Ok(Translated {
            fields: out.fields,
            labels: out.labels,
        })
    }
}

/// A native record, read by column name.
struct Row<'r, 'a> {
    translation: &'r Translation,
    fields: &'r [Option<&'a str>],
}

impl<'a> Row<'_, 'a> {
    /// The trimmed value of a native column; `None` when the column is absent or the value empty.
    /// Only the columns of [`Native::consumed`] are read, so that none is also passed through.
    fn get(&self, name: &'static str) -> Option<&'a str> {
        debug_assert!(
            self.translation.native.consumed().contains(&name),
            "{name} is read but not listed in Native::consumed"
        );
        let i = *self.translation.position.get(name)?;
        self.fields
            .get(i)
            .copied()
            .flatten()
            .map(str::trim)
            .filter(|t| !t.is_empty())
    }

    fn text(&self, name: &'static str) -> Option<Cow<'a, str>> {
        self.get(name).map(Cow::Borrowed)
    }
}

/// The FOCUS values of one record, set by column name.
struct Out<'a> {
    fields: Vec<Option<Cow<'a, str>>>,
    labels: Vec<Cow<'static, str>>,
}

impl<'a> Out<'a> {
    fn new() -> Self {
        Self {
            fields: vec![None; OUTPUT.len()],
            labels: OUTPUT.iter().map(|c| Cow::Borrowed(*c)).collect(),
        }
    }

    /// Sets FOCUS column `column` from native column(s) `from` (what a rejection names).
    fn set(&mut self, column: &str, value: Option<Cow<'a, str>>, from: &'static str) {
        let i = output_index(column);
        self.fields[i] = value;
        self.labels[i] = Cow::Borrowed(from);
    }

    /// The commitment discount a line uses or pays for, all from the native column `from`.
    fn commitment(
        &mut self,
        id: &'a str,
        name: Option<Cow<'a, str>>,
        category: Option<&'static str>,
        kind: Option<&'static str>,
        from: &'static str,
    ) {
        self.set("CommitmentDiscountId", Some(Cow::Borrowed(id)), from);
        self.set("CommitmentDiscountName", name, from);
        self.set(
            "CommitmentDiscountCategory",
            category.map(Cow::Borrowed),
            from,
        );
        self.set("CommitmentDiscountType", kind.map(Cow::Borrowed), from);
    }

    /// A value the provider always has (its name), from no native column.
    fn fixed(&mut self, column: &str, value: &'static str) {
        self.fields[output_index(column)] = Some(Cow::Borrowed(value));
    }
}

fn output_index(column: &str) -> usize {
    OUTPUT
        .iter()
        .position(|c| *c == column)
        .expect("an OUTPUT column")
}

/// The exact sum of native numbers, as FOCUS Numeric text. A value that is not a number is
/// returned as written, for the FOCUS rule to reject the line naming where it came from; an
/// empty one counts as 0 unless all are empty. Arithmetic on native numbers saturates: each is
/// under 10^38 units, so a result that overflows `i128` is past the lake's decimal too, and the
/// FOCUS rule rejects its text the same way.
fn sum<'a>(values: &[Option<&'a str>]) -> Option<Cow<'a, str>> {
    if values.iter().all(Option::is_none) {
        return None;
    }
    let mut units: i128 = 0;
    for value in values.iter().flatten() {
        match parse_number(value) {
            Ok(part) => units = units.saturating_add(part),
            Err(_) => return Some(Cow::Borrowed(value)),
        }
    }
    Some(Cow::Owned(units_text(units)))
}

/// Units of 10⁻¹² as a decimal.
fn units_text(units: i128) -> String {
    let sign = if units < 0 { "-" } else { "" };
    let magnitude = units.unsigned_abs();
    format!(
        "{sign}{}.{:012}",
        magnitude / 1_000_000_000_000,
        magnitude % 1_000_000_000_000
    )
}

fn lookup(table: &[(&str, &'static str)], key: Option<&str>) -> Option<Cow<'static, str>> {
    let key = key?;
    table
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| Cow::Borrowed(*v))
}

/// One AWS CUR line. EffectiveCost is the amortised cost per line item type (the converter's
/// rule): a reservation's or savings plan's effective cost on the usage they cover, 0 on the
/// negation and upfront-fee lines that would count them twice, the unused part on the recurring
/// fees, the unblended cost otherwise.
fn aws_cur<'a>(row: &Row<'_, 'a>, out: &mut Out<'a>) {
    let kind = row.get("lineItem/LineItemType").unwrap_or_default();
    let (billed, billed_from) = match row.get("lineItem/NetUnblendedCost") {
        Some(net) => (Some(net), "lineItem/NetUnblendedCost"),
        None => (row.get("lineItem/UnblendedCost"), "lineItem/UnblendedCost"),
    };
    let reservation = row.get("reservation/ReservationARN");
    let savings_plan = row.get("savingsPlan/SavingsPlanARN");
    let (effective, effective_from): (Option<Cow<'a, str>>, &'static str) = match kind {
        "DiscountedUsage" => (
            row.text("reservation/EffectiveCost"),
            "reservation/EffectiveCost",
        ),
        "SavingsPlanCoveredUsage" => (
            row.text("savingsPlan/SavingsPlanEffectiveCost"),
            "savingsPlan/SavingsPlanEffectiveCost",
        ),
        "SavingsPlanNegation" | "SavingsPlanUpfrontFee" => {
            (Some(Cow::Borrowed("0")), "lineItem/LineItemType")
        }
        "SavingsPlanRecurringFee" => (
            match (
                row.get("savingsPlan/TotalCommitmentToDate"),
                row.get("savingsPlan/UsedCommitment"),
            ) {
                (Some(total), used) => match (parse_number(total), used.map(parse_number)) {
                    (Ok(total), Some(Ok(used))) => {
                        Some(Cow::Owned(units_text(total.saturating_sub(used))))
                    }
                    (Ok(total), None) => Some(Cow::Owned(units_text(total))),
                    (Err(_), _) => Some(Cow::Borrowed(total)),
                    (_, Some(Err(_))) => used.map(Cow::Borrowed),
                },
                (None, _) => None,
            },
            "savingsPlan/TotalCommitmentToDate - savingsPlan/UsedCommitment",
        ),
        "RIFee" => (
            sum(&[
                row.get("reservation/UnusedAmortizedUpfrontFeeForBillingPeriod"),
                row.get("reservation/UnusedRecurringFee"),
            ]),
            "reservation/UnusedAmortizedUpfrontFeeForBillingPeriod + reservation/UnusedRecurringFee",
        ),
        "Fee" if reservation.is_some() => (Some(Cow::Borrowed("0")), "reservation/ReservationARN"),
        _ => (billed.map(Cow::Borrowed), billed_from),
    };
    // FOCUS has Credit (the converter still writes Adjustment); a refund corrects a charge.
    let (category, class, frequency) = match kind {
        "Usage"
        | "DiscountedUsage"
        | "SavingsPlanCoveredUsage"
        | "SavingsPlanNegation"
        | "BundledDiscount"
        | "Discount"
        | "PrivateRateDiscount"
        | "EdpDiscount" => ("Usage", None, Some("Usage-Based")),
        "RIFee" | "SavingsPlanRecurringFee" => ("Purchase", None, Some("Recurring")),
        "Fee" | "SavingsPlanUpfrontFee" => ("Purchase", None, Some("One-Time")),
        "Tax" => ("Tax", None, None),
        "Credit" => ("Credit", None, None),
        "Refund" => ("Adjustment", Some("Correction"), None),
        other => (other, None, None),
    };
    let usage_type = row.get("lineItem/UsageType");
    let pricing_category = match row.get("product/PurchaseOption") {
        Some("On-Demand" | "Dedicated Hosts") => Some("Standard"),
        Some("Reserved Instances" | "Savings Plans") => Some("Committed"),
        Some("Spot Instances") => Some("Dynamic"),
        Some(_) => Some("Other"),
        None if usage_type.is_some_and(|t| t.contains("SpotUsage")) => Some("Dynamic"),
        None => match row.get("pricing/term") {
            Some("OnDemand") => Some("Standard"),
            Some("Reserved") => Some("Committed"),
            _ => None,
        },
    };
    let (commitment, commitment_from, commitment_category, commitment_type) =
        match (savings_plan, reservation) {
            (Some(arn), _) => (
                Some(arn),
                "savingsPlan/SavingsPlanARN",
                Some("Spend"),
                Some("Savings Plan"),
            ),
            (None, Some(arn)) => (
                Some(arn),
                "reservation/ReservationARN",
                Some("Usage"),
                Some("Reserved Instance"),
            ),
            (None, None) => (None, "reservation/ReservationARN", None, None),
        };
    let commitment_status = match kind {
        "DiscountedUsage" | "SavingsPlanCoveredUsage" => Some("Used"),
        "RIFee" | "SavingsPlanRecurringFee" if commitment.is_some() => Some("Unused"),
        _ => None,
    };

    out.set(
        "BillingAccountId",
        row.text("bill/PayerAccountId"),
        "bill/PayerAccountId",
    );
    out.set(
        "BillingCurrency",
        row.text("lineItem/CurrencyCode"),
        "lineItem/CurrencyCode",
    );
    out.set(
        "BillingPeriodStart",
        row.text("bill/BillingPeriodStartDate"),
        "bill/BillingPeriodStartDate",
    );
    out.set(
        "BillingPeriodEnd",
        row.text("bill/BillingPeriodEndDate"),
        "bill/BillingPeriodEndDate",
    );
    out.set(
        "ChargePeriodStart",
        row.text("lineItem/UsageStartDate"),
        "lineItem/UsageStartDate",
    );
    out.set(
        "ChargePeriodEnd",
        row.text("lineItem/UsageEndDate"),
        "lineItem/UsageEndDate",
    );
    out.set(
        "ChargeCategory",
        Some(Cow::Borrowed(category)).filter(|c| !c.is_empty()),
        "lineItem/LineItemType",
    );
    out.set(
        "ChargeClass",
        class.map(Cow::Borrowed),
        "lineItem/LineItemType",
    );
    out.set(
        "ChargeDescription",
        row.text("lineItem/LineItemDescription"),
        "lineItem/LineItemDescription",
    );
    out.set(
        "ChargeFrequency",
        frequency.map(Cow::Borrowed),
        "lineItem/LineItemType",
    );
    out.set("BilledCost", billed.map(Cow::Borrowed), billed_from);
    out.set("EffectiveCost", effective, effective_from);
    out.set(
        "ListCost",
        row.text("pricing/publicOnDemandCost"),
        "pricing/publicOnDemandCost",
    );
    out.set(
        "ListUnitPrice",
        row.text("pricing/publicOnDemandRate"),
        "pricing/publicOnDemandRate",
    );
    match row.get("reservation/TotalReservedUnits") {
        Some(units) => out.set(
            "PricingQuantity",
            Some(Cow::Borrowed(units)),
            "reservation/TotalReservedUnits",
        ),
        None => out.set(
            "PricingQuantity",
            row.text("lineItem/UsageAmount"),
            "lineItem/UsageAmount",
        ),
    }
    out.set("PricingUnit", row.text("pricing/unit"), "pricing/unit");
    out.set(
        "PricingCategory",
        pricing_category.map(Cow::Borrowed),
        "product/PurchaseOption",
    );
    out.set(
        "PricingCurrency",
        row.text("pricing/currency"),
        "pricing/currency",
    );
    out.set(
        "ConsumedQuantity",
        row.text("lineItem/UsageAmount"),
        "lineItem/UsageAmount",
    );
    out.set("ConsumedUnit", row.text("pricing/unit"), "pricing/unit");
    out.fixed("ProviderName", "AWS");
    out.set(
        "PublisherName",
        row.text("lineItem/LegalEntity"),
        "lineItem/LegalEntity",
    );
    out.set(
        "InvoiceIssuerName",
        row.text("bill/InvoicingEntity"),
        "bill/InvoicingEntity",
    );
    out.set("InvoiceId", row.text("bill/InvoiceId"), "bill/InvoiceId");
    let product_code = row.get("lineItem/ProductCode");
    out.set(
        "ServiceCategory",
        lookup(AWS_SERVICE_CATEGORIES, product_code),
        "lineItem/ProductCode",
    );
    // The product's name, as AWS's own FOCUS export writes it (the converter takes the code).
    match row.get("product/ProductName") {
        Some(name) => out.set(
            "ServiceName",
            Some(Cow::Borrowed(name)),
            "product/ProductName",
        ),
        None => out.set(
            "ServiceName",
            product_code.map(Cow::Borrowed),
            "lineItem/ProductCode",
        ),
    }
    out.set(
        "ResourceId",
        row.text("lineItem/ResourceId"),
        "lineItem/ResourceId",
    );
    out.set("RegionId", row.text("product/region"), "product/region");
    out.set(
        "RegionName",
        row.text("product/location"),
        "product/location",
    );
    out.set(
        "AvailabilityZone",
        row.text("lineItem/AvailabilityZone"),
        "lineItem/AvailabilityZone",
    );
    out.set("SkuId", row.text("product/sku"), "product/sku");
    match row.get("pricing/RateCode") {
        Some(code) => out.set("SkuPriceId", Some(Cow::Borrowed(code)), "pricing/RateCode"),
        None => out.set("SkuPriceId", row.text("pricing/RateId"), "pricing/RateId"),
    }
    out.set(
        "SkuMeter",
        usage_type.map(Cow::Borrowed),
        "lineItem/UsageType",
    );
    out.set(
        "SubAccountId",
        row.text("lineItem/UsageAccountId"),
        "lineItem/UsageAccountId",
    );
    out.set(
        "SubAccountName",
        row.text("lineItem/UsageAccountName"),
        "lineItem/UsageAccountName",
    );
    if let Some(id) = commitment {
        out.commitment(
            id,
            None,
            commitment_category,
            commitment_type,
            commitment_from,
        );
    }
    out.set(
        "CommitmentDiscountStatus",
        commitment_status.map(Cow::Borrowed),
        "lineItem/LineItemType",
    );
    // `resourceTags/user:team` is the tag `team`, as shared-cost rules and AllocatedTags name it.
    let mut tags = Map::new();
    for (i, key) in &row.translation.tag_columns {
        if let Some(value) = row.fields[*i].map(str::trim).filter(|v| !v.is_empty()) {
            tags.insert(key.clone(), Json::String(value.to_string()));
        }
    }
    if !tags.is_empty() {
        out.set(
            "Tags",
            Some(Cow::Owned(Json::Object(tags).to_string())),
            "resourceTags/*",
        );
    }
}

/// An Azure EA date: `M/D/YYYY` as the export writes it, or ISO 8601; `plus_days` later, as a
/// FOCUS date-time. EA dates are whole days, and their ends inclusive.
fn ea_date(text: &str, plus_days: u64) -> Option<String> {
    let date = NaiveDate::parse_from_str(text, "%m/%d/%Y")
        .or_else(|_| NaiveDate::parse_from_str(text, "%Y-%m-%d"))
        .or_else(|_| NaiveDate::parse_from_str(text.get(..10).unwrap_or(text), "%Y-%m-%d"))
        .ok()?;
    let date = date.checked_add_days(Days::new(plus_days))?;
    Some(format!("{date}T00:00:00Z"))
}

/// One Azure EA line, as Microsoft's conversion guide reads it: a commitment's amortised usage
/// has no BilledCost (the purchase was billed), a commitment purchase or refund no EffectiveCost
/// (its usage carries it), so an amortised export balances on EffectiveCost and an actual one on
/// BilledCost. The converter's charge period (the billing period's start) and inclusive ends are
/// not FOCUS; the line's day is its charge period here.
fn azure_ea<'a>(row: &Row<'_, 'a>, out: &mut Out<'a>) -> Result<(), (String, String)> {
    let day = row.get("Date");
    let (start, end) = match day {
        None => (None, None),
        Some(text) => match (ea_date(text, 0), ea_date(text, 1)) {
            (Some(start), Some(end)) => (Some(start), Some(end)),
            _ => {
                return Err((
                    "Date".into(),
                    format!("'{text}' is not a date (M/D/YYYY or YYYY-MM-DD)"),
                ));
            }
        },
    };
    let charge_type = row.get("ChargeType").unwrap_or("Usage");
    let pricing_model = row.get("PricingModel");
    let commitment_usage = matches!(
        pricing_model,
        Some("Reservation" | "SavingsPlan" | "Savings Plan")
    ) || charge_type.starts_with("Unused");
    let commitment = row
        .get("benefitId")
        .map(|id| (id, "benefitId", row.text("benefitName")))
        .or_else(|| {
            row.get("ReservationId")
                .map(|id| (id, "ReservationId", row.text("ReservationName")))
        });
    let commitment_purchase =
        matches!(charge_type, "Purchase" | "Refund") && (commitment.is_some() || commitment_usage);
    let cost = row.text("CostInBillingCurrency");
    let zero = || Some(Cow::Borrowed("0"));
    let (billed, effective) = match (commitment_usage, commitment_purchase) {
        (true, _) => (zero(), cost),
        (false, true) => (cost, zero()),
        (false, false) => (cost.clone(), cost),
    };
    let (category, class) = match charge_type {
        "Usage" | "UnusedReservation" | "UnusedSavingsPlan" => ("Usage", None),
        "Purchase" => ("Purchase", None),
        "Refund" => ("Purchase", Some("Correction")),
        "Tax" => ("Tax", None),
        "Credit" => ("Credit", None),
        _ => ("Adjustment", None),
    };
    let frequency = match row.get("Frequency") {
        Some("OneTime") => Some(Cow::Borrowed("One-Time")),
        Some("Recurring") => Some(Cow::Borrowed("Recurring")),
        Some("UsageBased") => Some(Cow::Borrowed("Usage-Based")),
        other => other.map(Cow::Borrowed),
    };
    let pricing_category = match pricing_model {
        Some("OnDemand") => Some("Standard"),
        Some("Spot") => Some("Dynamic"),
        Some("Reservation" | "SavingsPlan" | "Savings Plan") => Some("Committed"),
        Some(_) => Some("Other"),
        None => None,
    };
    let (commitment_category, commitment_type) = match commitment {
        Some((id, _, _)) if id.to_lowercase().contains("/microsoft.billingbenefits/") => {
            (Some("Spend"), Some("Savings Plan"))
        }
        Some(_) => (Some("Usage"), Some("Reservation")),
        None => (None, None),
    };
    let commitment_status = if charge_type.starts_with("Unused") {
        Some("Unused")
    } else if commitment_usage {
        Some("Used")
    } else {
        None
    };
    let either = |a: &'static str, b: &'static str| match row.get(a) {
        Some(value) => (Some(Cow::Borrowed(value)), a),
        None => (row.text(b), b),
    };

    let (account, account_from) = either("BillingAccountId", "BillingProfileId");
    out.set("BillingAccountId", account, account_from);
    let (name, name_from) = either("BillingAccountName", "BillingProfileName");
    out.set("BillingAccountName", name, name_from);
    let (currency, currency_from) = either("BillingCurrencyCode", "BillingCurrency");
    out.set("BillingCurrency", currency, currency_from);
    let period = |column: &'static str, plus_days| {
        row.get(column)
            .map(|text| ea_date(text, plus_days).map_or(Cow::Borrowed(text), Cow::Owned))
    };
    out.set(
        "BillingPeriodStart",
        period("BillingPeriodStartDate", 0),
        "BillingPeriodStartDate",
    );
    out.set(
        "BillingPeriodEnd",
        period("BillingPeriodEndDate", 1),
        "BillingPeriodEndDate",
    );
    out.set("ChargePeriodStart", start.map(Cow::Owned), "Date");
    out.set("ChargePeriodEnd", end.map(Cow::Owned), "Date");
    out.set(
        "ChargeCategory",
        Some(Cow::Borrowed(category)),
        "ChargeType",
    );
    out.set("ChargeClass", class.map(Cow::Borrowed), "ChargeType");
    out.set("ChargeDescription", row.text("ProductName"), "ProductName");
    out.set("ChargeFrequency", frequency, "Frequency");
    out.set("BilledCost", billed, "CostInBillingCurrency");
    out.set("EffectiveCost", effective, "CostInBillingCurrency");
    out.set("ListUnitPrice", row.text("PayGPrice"), "PayGPrice");
    out.set("ContractedUnitPrice", row.text("UnitPrice"), "UnitPrice");
    out.set("PricingQuantity", row.text("Quantity"), "Quantity");
    out.set("PricingUnit", row.text("UnitOfMeasure"), "UnitOfMeasure");
    out.set(
        "PricingCategory",
        pricing_category.map(Cow::Borrowed),
        "PricingModel",
    );
    out.set("ConsumedQuantity", row.text("Quantity"), "Quantity");
    out.set("ConsumedUnit", row.text("UnitOfMeasure"), "UnitOfMeasure");
    out.fixed("ProviderName", "Microsoft");
    out.set("PublisherName", row.text("PublisherName"), "PublisherName");
    out.fixed("InvoiceIssuerName", "Microsoft");
    let meter_category = row.get("MeterCategory");
    out.set(
        "ServiceCategory",
        lookup(AZURE_SERVICE_CATEGORIES, meter_category),
        "MeterCategory",
    );
    out.set(
        "ServiceName",
        meter_category.map(Cow::Borrowed),
        "MeterCategory",
    );
    out.set("ResourceId", row.text("ResourceId"), "ResourceId");
    out.set("ResourceName", row.text("ResourceName"), "ResourceName");
    // FOCUS RegionId as Azure writes it elsewhere: lower case, no spaces (`CentralUS` → `centralus`).
    let location = row.get("ResourceLocation");
    out.set(
        "RegionId",
        location.map(|l| Cow::Owned(l.replace(' ', "").to_lowercase())),
        "ResourceLocation",
    );
    out.set(
        "RegionName",
        location.map(Cow::Borrowed),
        "ResourceLocation",
    );
    out.set(
        "AvailabilityZone",
        row.text("AvailabilityZone"),
        "AvailabilityZone",
    );
    out.set("SkuId", row.text("MeterId"), "MeterId");
    out.set("SkuMeter", row.text("MeterName"), "MeterName");
    out.set("SubAccountId", row.text("SubscriptionId"), "SubscriptionId");
    out.set(
        "SubAccountName",
        row.text("SubscriptionName"),
        "SubscriptionName",
    );
    if let Some((id, from, name)) = commitment {
        out.commitment(id, name, commitment_category, commitment_type, from);
    }
    out.set(
        "CommitmentDiscountStatus",
        commitment_status.map(Cow::Borrowed),
        "ChargeType",
    );
    // EA writes the tags' JSON members without the braces.
    let tags = row.get("Tags").map(|t| {
        if t.starts_with('{') {
            Cow::Borrowed(t)
        } else {
            Cow::Owned(format!("{{{t}}}"))
        }
    });
    out.set("Tags", tags, "Tags");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_sums_and_differences_of_native_numbers() {
        assert_eq!(
            sum(&[Some("1.5E-7"), Some("2")]).as_deref(),
            Some("2.000000150000")
        );
        assert_eq!(
            sum(&[None, Some("-0.25")]).as_deref(),
            Some("-0.250000000000")
        );
        assert_eq!(sum(&[None, None]), None);
        assert_eq!(sum(&[Some("1"), Some("$2")]).as_deref(), Some("$2"));
        assert_eq!(units_text(-1), "-0.000000000001");
    }

    #[test]
    fn ea_dates_are_whole_days_with_exclusive_ends() {
        assert_eq!(
            ea_date("9/2/2023", 0).as_deref(),
            Some("2023-09-02T00:00:00Z")
        );
        assert_eq!(
            ea_date("9/30/2023", 1).as_deref(),
            Some("2023-10-01T00:00:00Z")
        );
        assert_eq!(
            ea_date("2023-12-31", 1).as_deref(),
            Some("2024-01-01T00:00:00Z")
        );
        assert_eq!(ea_date("31/12/2023", 0), None);
    }
}
