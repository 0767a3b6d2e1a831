//! `amortize_share(amount, weight, total_weight)`: one team's part of a shared pool (docs/design.md §6).

use arrow::datatypes::DataType;
use datafusion::common::{Result, internal_err};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};
use datafusion_macros::user_doc;
use gpuledger_ledger::amortize::share_of;

use super::args::{evaluate, float_rows, floats};

#[user_doc(
    doc_section(label = "Ledger Functions"),
    description = "The part of a shared amount that falls to one weight out of a total: \
        amount × weight / total_weight. NULL when total_weight is not positive \
        (nothing to spread over) or when any argument is NULL.",
    syntax_example = "amortize_share(amount, weight, total_weight)",
    sql_example = r#"```sql
> select team, amortize_share(1200.0, gpu_hours, sum(gpu_hours) over ()) as control_plane
  from (values ('a', 30.0), ('b', 10.0)) t(team, gpu_hours);
+------+---------------+
| team | control_plane |
+------+---------------+
| a    | 900.0         |
| b    | 300.0         |
+------+---------------+
```"#,
    argument(
        name = "amount",
        description = "The pool to spread, e.g. a shared cost."
    ),
    argument(
        name = "weight",
        description = "This row's weight: direct cost, GPU-hours, a usage measure or a fixed weight."
    ),
    argument(
        name = "total_weight",
        description = "The sum of the weights the pool is spread over."
    )
)]
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AmortizeShare {
    signature: Signature,
}

impl Default for AmortizeShare {
    fn default() -> Self {
        Self {
            signature: Signature::exact(vec![DataType::Float64; 3], Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for AmortizeShare {
    fn name(&self) -> &str {
        "amortize_share"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn is_strict(&self) -> bool {
        true
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [amount, weight, total_weight] = args.args.as_slice() else {
            return internal_err!("amortize_share takes 3 arguments");
        };
        let (amount, weight, total_weight) =
            (floats(amount)?, floats(weight)?, floats(total_weight)?);
        evaluate(&args, |rows| {
            float_rows(rows, |row| {
                share_of(amount.get(row)?, weight.get(row)?, total_weight.get(row)?)
            })
        })
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.doc()
    }
}

#[cfg(test)]
mod tests;
