//! What FOCUS columns are (names and 1.3 aliases, value rules, presence) and how one input's
//! header maps onto them.

use crate::error::IngestError;

/// How a FOCUS column's text becomes its typed value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Rule {
    Text,
    /// One of these values, matched case-insensitively and written as listed here.
    Allowed(&'static [&'static str]),
    /// A JSON object (FOCUS Key-Value Format), stored re-serialised (compact, keys sorted).
    KeyValue,
    /// FOCUS Date/Time.
    Time,
    Number,
    /// FOCUS Currency Format for a national currency: an ISO 4217 code, three letters, stored
    /// upper-case. A line whose currency is not one cannot be summed with any other: rejected.
    Currency,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Presence {
    /// The ledger cannot use a line without it: the header must have it, every line a value.
    Required,
    /// FOCUS Mandatory, and the ledger spreads a charge over it: the header must have it (an
    /// export without it is not FOCUS), but a line whose value is null or malformed still lands,
    /// its text kept, and is priced as an instant at its start.
    InHeader,
    /// FOCUS 1.2 Mandatory: an input without it still lands, and the gap is reported.
    Mandatory,
    Optional,
}

/// A FOCUS column; its `billing_lines` column is its first name in snake_case.
pub(super) struct FocusColumn {
    /// Its FOCUS names: the 1.0–1.2 name first, then any 1.3 replacement.
    pub(super) names: &'static [&'static str],
    pub(super) rule: Rule,
    pub(super) presence: Presence,
}

pub(super) const fn focus(
    names: &'static [&'static str],
    rule: Rule,
    presence: Presence,
) -> FocusColumn {
    FocusColumn {
        names,
        rule,
        presence,
    }
}

const CHARGE_CATEGORIES: &[&str] = &["Usage", "Purchase", "Tax", "Credit", "Adjustment"];
const CHARGE_CLASSES: &[&str] = &["Correction"];
const CHARGE_FREQUENCIES: &[&str] = &["One-Time", "Recurring", "Usage-Based"];
const PRICING_CATEGORIES: &[&str] = &["Standard", "Dynamic", "Committed", "Other"];
const COMMITMENT_DISCOUNT_CATEGORIES: &[&str] = &["Spend", "Usage"];
const USE_STATUSES: &[&str] = &["Used", "Unused"];
const SERVICE_CATEGORIES: &[&str] = &[
    "AI and Machine Learning",
    "Analytics",
    "Business Applications",
    "Compute",
    "Databases",
    "Developer Tools",
    "Multicloud",
    "Identity",
    "Integration",
    "Internet of Things",
    "Management and Governance",
    "Media",
    "Migration",
    "Mobile",
    "Networking",
    "Security",
    "Storage",
    "Web",
    "Other",
];

use Presence::{InHeader, Mandatory, Optional, Required};
use Rule::{Allowed, Currency, KeyValue, Number, Text, Time};

/// The FOCUS columns of `billing_lines`, in its schema order (a test holds them together); the
/// schema ends with `extra_columns`, `source_file` and `source_line`, which are not FOCUS's.
pub(super) const FOCUS_COLUMNS: &[FocusColumn] = &[
    focus(&["BillingAccountId"], Text, Mandatory),
    focus(&["BillingAccountName"], Text, Mandatory),
    focus(&["BillingAccountType"], Text, Optional),
    focus(&["BillingCurrency"], Currency, Mandatory),
    focus(&["BillingPeriodStart"], Time, Mandatory),
    focus(&["BillingPeriodEnd"], Time, Mandatory),
    focus(&["ChargePeriodStart"], Time, Required),
    focus(&["ChargePeriodEnd"], Time, InHeader),
    focus(&["ChargeCategory"], Allowed(CHARGE_CATEGORIES), Mandatory),
    focus(&["ChargeClass"], Allowed(CHARGE_CLASSES), Mandatory),
    focus(&["ChargeDescription"], Text, Mandatory),
    focus(&["ChargeFrequency"], Allowed(CHARGE_FREQUENCIES), Optional),
    focus(&["BilledCost"], Number, Required),
    focus(&["EffectiveCost"], Number, Required),
    focus(&["ListCost"], Number, Mandatory),
    focus(&["ContractedCost"], Number, Mandatory),
    focus(&["ListUnitPrice"], Number, Optional),
    focus(&["ContractedUnitPrice"], Number, Optional),
    focus(&["PricingQuantity"], Number, Mandatory),
    focus(&["PricingUnit"], Text, Mandatory),
    focus(&["PricingCategory"], Allowed(PRICING_CATEGORIES), Optional),
    focus(&["PricingCurrency"], Text, Optional),
    focus(&["ConsumedQuantity"], Number, Optional),
    focus(&["ConsumedUnit"], Text, Optional),
    focus(&["ProviderName", "ServiceProviderName"], Text, Mandatory),
    focus(&["PublisherName", "HostProviderName"], Text, Mandatory),
    focus(&["InvoiceIssuerName"], Text, Mandatory),
    focus(&["InvoiceId"], Text, Optional),
    focus(&["ServiceCategory"], Allowed(SERVICE_CATEGORIES), Mandatory),
    focus(&["ServiceSubcategory"], Text, Optional),
    focus(&["ServiceName"], Text, Mandatory),
    focus(&["ResourceId"], Text, Optional),
    focus(&["ResourceName"], Text, Optional),
    focus(&["ResourceType"], Text, Optional),
    focus(&["RegionId"], Text, Optional),
    focus(&["RegionName"], Text, Optional),
    focus(&["AvailabilityZone"], Text, Optional),
    focus(&["SkuId"], Text, Optional),
    focus(&["SkuPriceId"], Text, Optional),
    focus(&["SkuMeter"], Text, Optional),
    focus(&["SkuPriceDetails"], KeyValue, Optional),
    focus(&["SubAccountId"], Text, Optional),
    focus(&["SubAccountName"], Text, Optional),
    focus(&["SubAccountType"], Text, Optional),
    focus(&["CommitmentDiscountId"], Text, Optional),
    focus(&["CommitmentDiscountName"], Text, Optional),
    focus(
        &["CommitmentDiscountCategory"],
        Allowed(COMMITMENT_DISCOUNT_CATEGORIES),
        Optional,
    ),
    focus(&["CommitmentDiscountType"], Text, Optional),
    focus(
        &["CommitmentDiscountStatus"],
        Allowed(USE_STATUSES),
        Optional,
    ),
    focus(&["CommitmentDiscountQuantity"], Number, Optional),
    focus(&["CommitmentDiscountUnit"], Text, Optional),
    focus(&["CapacityReservationId"], Text, Optional),
    focus(
        &["CapacityReservationStatus"],
        Allowed(USE_STATUSES),
        Optional,
    ),
    focus(&["AllocatedMethodId"], Text, Optional),
    focus(&["AllocatedResourceId"], Text, Optional),
    focus(&["AllocatedResourceName"], Text, Optional),
    focus(&["AllocatedTags"], KeyValue, Optional),
    focus(&["Tags"], KeyValue, Optional),
];

/// Provider-native billing exports that get fed to a FOCUS reader by mistake, each recognised
/// by a column it always has, and the source that reads it, if one does.
const NATIVE_FORMATS: &[(&str, &str, Option<&str>)] = &[
    (
        "lineItem/UsageStartDate",
        "an AWS Cost and Usage Report (legacy CUR)",
        Some("aws-cur"),
    ),
    (
        "line_item_usage_start_date",
        "an AWS Cost and Usage Report 2.0 (Data Exports)",
        None,
    ),
    (
        "lineItem/intervalUsageStart",
        "an Oracle Cloud (OCI) cost report",
        None,
    ),
    (
        "CostInBillingCurrency",
        "an Azure Enterprise Agreement (EA) cost export",
        Some("azure-ea"),
    ),
];

/// Where each input column goes.
pub(super) struct Layout {
    pub(super) headers: Vec<String>,
    /// Per input column: the index in [`FOCUS_COLUMNS`] it fills, or `None` for `extra_columns`.
    pub(super) targets: Vec<Option<usize>>,
}

impl Layout {
    /// Matches a header to the FOCUS columns (a second column for the same FOCUS column goes to
    /// `extra_columns`), or says why the input is not FOCUS. Also returns the FOCUS Mandatory
    /// columns it lacks.
    pub(super) fn new(
        headers: Vec<String>,
        origin: &str,
    ) -> Result<(Self, Vec<&'static str>), IngestError> {
        let mut filled = vec![false; FOCUS_COLUMNS.len()];
        let mut targets = Vec::with_capacity(headers.len());
        for header in &headers {
            let name = header.trim();
            let target = FOCUS_COLUMNS
                .iter()
                .position(|c| c.names.iter().any(|n| n.eq_ignore_ascii_case(name)))
                .filter(|&index| !filled[index]);
            if let Some(index) = target {
                filled[index] = true;
            }
            targets.push(target);
        }
        let absent = |presences: &[Presence]| -> Vec<&'static str> {
            FOCUS_COLUMNS
                .iter()
                .zip(&filled)
                .filter(|(column, filled)| presences.contains(&column.presence) && !**filled)
                .map(|(column, _)| column.names[0])
                .collect()
        };
        let missing = absent(&[Required, InHeader]);
        if !missing.is_empty() {
            let missing = missing.join(", ");
            let native = NATIVE_FORMATS.iter().find(|(marker, _, _)| {
                headers
                    .iter()
                    .any(|header| header.trim().eq_ignore_ascii_case(marker))
            });
            let reason = match native {
                Some((_, kind, reader)) => {
                    let hint = reader
                        .map(|source| format!("; ingest it as `{source}`"))
                        .unwrap_or_default();
                    format!(
                        "looks like {kind}, not FOCUS: missing mandatory columns {missing}{hint}"
                    )
                }
                None => format!("not a FOCUS file: missing mandatory columns {missing}"),
            };
            return Err(IngestError::Format {
                origin: origin.to_string(),
                reason,
            });
        }
        Ok((Self { headers, targets }, absent(&[Mandatory])))
    }
}

/// Optional columns whose malformed value rejects the line instead of landing it with the text
/// kept under [`INVALID_KEY`]: the currency (amounts in no currency cannot be summed with any
/// other) and the tags that say who pays (a cost whose tags cannot be read would be charged to
/// nobody without a word).
pub(super) fn rejects_when_malformed(index: usize) -> bool {
    let column = &FOCUS_COLUMNS[index];
    column.rule == Currency || matches!(column.names[0], "Tags" | "AllocatedTags")
}

/// The position of a FOCUS column in `FOCUS_COLUMNS`, by its first name.
pub(super) fn column_index(name: &str) -> usize {
    FOCUS_COLUMNS
        .iter()
        .position(|c| c.names[0] == name)
        .expect("a FOCUS column")
}

/// The (start, end) column pairs of a period: `*PeriodEnd` is exclusive, never before the start.
pub(super) const PERIODS: [(&str, &str); 2] = [
    ("ChargePeriodStart", "ChargePeriodEnd"),
    ("BillingPeriodStart", "BillingPeriodEnd"),
];
