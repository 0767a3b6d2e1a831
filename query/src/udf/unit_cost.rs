//! `unit_cost(cost, units [, per])`: cost per unit of output (docs/design.md §7).

use arrow::datatypes::DataType;
use datafusion::common::{Result, internal_err};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use datafusion_macros::user_doc;
use gpuledger_ledger::usage::unit_cost;

use super::args::{Arg, evaluate, float_rows, floats};

#[user_doc(
    doc_section(label = "Ledger Functions"),
    description = "Cost per unit of output: cost / units × per. `per` scales the \
        unit, e.g. 1e6 for the cost per 1M tokens. NULL when units is not positive (no output \
        is not free output) or when any argument is NULL.",
    syntax_example = "unit_cost(cost, units [, per])",
    sql_example = r#"```sql
> select unit_cost(12.0, 3000000, 1e6) as per_1m_tokens, unit_cost(12.0, 4) as per_request;
+---------------+-------------+
| per_1m_tokens | per_request |
+---------------+-------------+
| 4.0           | 3.0         |
+---------------+-------------+
```"#,
    argument(
        name = "cost",
        description = "The cost of the output, e.g. inference cost."
    ),
    argument(
        name = "units",
        description = "The effective output: billable tokens of SLO-met requests, successful requests, samples."
    ),
    argument(name = "per", description = "Units per priced unit; 1 when omitted.")
)]
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct UnitCost {
    signature: Signature,
}

impl Default for UnitCost {
    fn default() -> Self {
        Self {
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![DataType::Float64; 2]),
                    TypeSignature::Exact(vec![DataType::Float64; 3]),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl ScalarUDFImpl for UnitCost {
    fn name(&self) -> &str {
        "unit_cost"
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
        let (cost, units, per) = match args.args.as_slice() {
            [cost, units] => (floats(cost)?, floats(units)?, Arg::Constant(Some(1.0))),
            [cost, units, per] => (floats(cost)?, floats(units)?, floats(per)?),
            _ => return internal_err!("unit_cost takes 2 or 3 arguments"),
        };
        evaluate(&args, |rows| {
            float_rows(rows, |row| {
                unit_cost(cost.get(row)?, units.get(row)?, per.get(row)?)
            })
        })
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.doc()
    }
}

#[cfg(test)]
mod tests;
