//! `idle_class(allocated_share, sm_active, reserved_reason, fault [, threshold])`: the docs/design.md §5
//! idle class of a stretch of GPU time, as `gpu_hours` classifies it.

use std::fmt::Write;
use std::sync::Arc;

use arrow::array::StringBuilder;
use arrow::datatypes::DataType;
use datafusion::common::{Result, internal_err};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use datafusion_macros::user_doc;
use gpuledger_ledger::gpu_hours::ClassifyConfig;
use gpuledger_ledger::usage::idle_class;

use super::args::{Arg, booleans, evaluate, floats, strings};

#[user_doc(
    doc_section(label = "Ledger Functions"),
    description = "The idle class of a stretch of GPU time, with the precedence of \
        the ledger's gpu_hours: allocated time (allocated_share > 0) is the owner's even on a \
        faulty GPU, and is `allocated_idle` when sm_active is below the threshold, else `busy` \
        (no telemetry is no evidence of idleness). Unallocated time is `fault` when fault is \
        true, else `reserved:<reason>` when reserved_reason is not NULL, else `unexplained`. \
        A NULL allocated_share counts as 0 and a NULL fault as false, so every row gets a class.",
    syntax_example = "idle_class(allocated_share, sm_active, reserved_reason, fault [, threshold])",
    sql_example = r#"```sql
> select idle_class(1.0, 0.02, null, false) as a, idle_class(0, null, 'warm_pool', false) as b;
+----------------+--------------------+
| a              | b                  |
+----------------+--------------------+
| allocated_idle | reserved:warm_pool |
+----------------+--------------------+
```"#,
    argument(
        name = "allocated_share",
        description = "Share of the GPU allocated to a workload (0–1); NULL counts as 0."
    ),
    argument(
        name = "sm_active",
        description = "Time-weighted SM activity (0–1) over the stretch; NULL when there was no telemetry."
    ),
    argument(
        name = "reserved_reason",
        description = "Reason of the declared reservation covering the stretch (warm_pool, ha_redundancy, …); NULL when none."
    ),
    argument(
        name = "fault",
        description = "Whether the GPU was unhealthy; NULL counts as false."
    ),
    argument(
        name = "threshold",
        description = "SM activity below which allocated time is idle; 0.05 when omitted or NULL."
    )
)]
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct IdleClassFunc {
    signature: Signature,
}

impl Default for IdleClassFunc {
    fn default() -> Self {
        let arguments = vec![
            DataType::Float64,
            DataType::Float64,
            DataType::Utf8,
            DataType::Boolean,
        ];
        let with_threshold = [arguments.clone(), vec![DataType::Float64]].concat();
        Self {
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(arguments),
                    TypeSignature::Exact(with_threshold),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for IdleClassFunc {
    fn name(&self) -> &str {
        "idle_class"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (share, sm_active, reason, fault, threshold) = match args.args.as_slice() {
            [share, sm_active, reason, fault] => (share, sm_active, reason, fault, None),
            [share, sm_active, reason, fault, threshold] => {
                (share, sm_active, reason, fault, Some(floats(threshold)?))
            }
            _ => return internal_err!("idle_class takes 4 or 5 arguments"),
        };
        let (share, sm_active) = (floats(share)?, floats(sm_active)?);
        let (reason, fault) = (strings(reason)?, booleans(fault)?);
        let threshold = threshold.unwrap_or(Arg::Constant(None));
        let default_threshold = ClassifyConfig::default().idle_threshold;
        evaluate(&args, |rows| {
            let mut classes = StringBuilder::with_capacity(rows, rows * "allocated_idle".len());
            for row in 0..rows {
                let class = idle_class(
                    share.get(row).unwrap_or(0.0),
                    sm_active.get(row),
                    reason.get(row),
                    fault.get(row).unwrap_or(false),
                    threshold.get(row).unwrap_or(default_threshold),
                );
                write!(classes, "{class}").expect("writing to a string builder cannot fail");
                classes.append_value("");
            }
            Arc::new(classes.finish())
        })
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.doc()
    }
}

#[cfg(test)]
mod tests;
