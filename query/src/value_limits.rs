//! Caps on what one scalar function call may build. The memory limit of a session counts what
//! operators reserve (sorts, joins, aggregates), not the arrays a scalar function returns: so
//! `repeat('x', 1500000000)`, `lpad('', 2000000000)` or `array_repeat(1, 500000000)` would
//! allocate gigabytes outside any limit. Each function that can build a value much larger than
//! its arguments is replaced in every limited session by a [`Bounded`] copy, which estimates the
//! size of its result from its arguments before it runs (an upper bound, per call: the whole
//! batch) and refuses past the cap, and checks the size of what it returned after.
//!
//! The string operator `||` is no function: DataFusion evaluates it as a binary expression,
//! which no cap sees, so `repeat('x', 60000000) || repeat('x', 60000000) || …` would build past
//! every cap. In a limited session [`ConcatOperatorPlanner`] plans `text || text` as
//! [`ConcatOperator`], a function that evaluates that very binary expression (same types, same
//! NULL rule, same column name), bounded like `concat`.

use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::compute::kernels::length::length;
use arrow::datatypes::{DataType, Field, FieldRef, Int64Type, Schema};
use datafusion::common::{DFSchema, Result as DfResult};
use datafusion::error::DataFusionError;
use datafusion::execution::FunctionRegistry;
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::planner::{ExprPlanner, PlannerResult, RawBinaryExpr};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::type_coercion::binary::BinaryTypeCoercer;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, ExprSchemable, Operator, ReturnFieldArgs,
    ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::BinaryOperator;

/// How the result of a function is bounded by its arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Estimate {
    /// `repeat(text, n)`: text × n.
    Repeat,
    /// `lpad(text, n [, fill])`, `rpad`: n characters of up to 4 bytes.
    Pad,
    /// `array_repeat(element, n)`: n elements.
    ArrayRepeat,
    /// `range(start, stop [, step])`, `generate_series`: (stop − start) / step elements.
    Range,
    /// `array_resize(array, n [, value])`: n elements.
    ArrayResize,
    /// `replace(text, from, to)`: every `from` of text replaced by `to`.
    Replace,
    /// `regexp_replace(text, pattern, replacement [, flags])`: a replacement per character.
    RegexpReplace,
    /// `concat(…)`: its arguments.
    Concat,
    /// `concat_ws(separator, …)`: its arguments, with a separator between each two.
    ConcatWs,
}

/// The functions that are bounded, by name.
const BOUNDED: [(&str, Estimate); 11] = [
    ("repeat", Estimate::Repeat),
    ("lpad", Estimate::Pad),
    ("rpad", Estimate::Pad),
    ("array_repeat", Estimate::ArrayRepeat),
    ("range", Estimate::Range),
    ("generate_series", Estimate::Range),
    ("array_resize", Estimate::ArrayResize),
    ("replace", Estimate::Replace),
    ("regexp_replace", Estimate::RegexpReplace),
    ("concat", Estimate::Concat),
    ("concat_ws", Estimate::ConcatWs),
];

/// The cap per call for a session whose queries may hold `memory_limit` bytes: a quarter of it,
/// at most 256 MiB.
pub fn cap_for(memory_limit: usize) -> u64 {
    ((memory_limit / 4) as u64).clamp(1 << 20, 256 << 20)
}

/// Replaces `ctx`'s functions of [`BOUNDED`] with copies that refuse results past `cap` bytes,
/// and plans the `||` of strings as a function bounded the same way.
pub fn bound_functions(ctx: &SessionContext, cap: u64) {
    let functions = ctx.state().scalar_functions().clone();
    for (name, estimate) in BOUNDED {
        if let Some(inner) = functions.get(name) {
            ctx.register_udf(ScalarUDF::new_from_impl(Bounded {
                inner: inner.as_ref().clone(),
                estimate,
                cap,
            }));
        }
    }
    let concat = Arc::new(ScalarUDF::new_from_impl(Bounded {
        inner: ScalarUDF::new_from_impl(ConcatOperator::new()),
        estimate: Estimate::Concat,
        cap,
    }));
    // Planners registered before (arrays: `list || list` is `array_concat`, already bounded by
    // its result) have their say first; this one takes only what they leave.
    ctx.state_ref()
        .write()
        .register_expr_planner(Arc::new(ConcatOperatorPlanner { concat }))
        .expect("a session takes expression planners");
}

/// Plans `a || b` of strings as the bounded [`ConcatOperator`].
#[derive(Debug)]
struct ConcatOperatorPlanner {
    concat: Arc<ScalarUDF>,
}

impl ExprPlanner for ConcatOperatorPlanner {
    fn plan_binary_op(
        &self,
        expr: RawBinaryExpr,
        schema: &DFSchema,
    ) -> DfResult<PlannerResult<RawBinaryExpr>> {
        if expr.op != BinaryOperator::StringConcat {
            return Ok(PlannerResult::Original(expr));
        }
        let is_list = |e: &Expr| {
            e.get_type(schema).is_ok_and(|t| {
                matches!(
                    t,
                    DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..)
                )
            })
        };
        if is_list(&expr.left) || is_list(&expr.right) {
            return Ok(PlannerResult::Original(expr));
        }
        Ok(PlannerResult::Planned(Expr::ScalarFunction(
            ScalarFunction::new_udf(Arc::clone(&self.concat), vec![expr.left, expr.right]),
        )))
    }
}

/// The `||` operator of two strings as a function: its operands coerced as the operator's are,
/// its result the operator's own (NULL when either side is NULL, unlike `concat`), and its
/// column named `a || b` as the operator's is.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ConcatOperator {
    signature: Signature,
}

impl ConcatOperator {
    fn new() -> Self {
        Self {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for ConcatOperator {
    fn name(&self) -> &str {
        "||"
    }

    fn schema_name(&self, args: &[Expr]) -> DfResult<String> {
        Ok(format!(
            "{} || {}",
            args[0].schema_name(),
            args[1].schema_name()
        ))
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        let [left, right] = arg_types else {
            return Err(DataFusionError::Plan("|| takes two operands".into()));
        };
        let (left, right) =
            BinaryTypeCoercer::new(left, &Operator::StringConcat, right).get_input_types()?;
        Ok(vec![left, right])
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        let [left, right] = arg_types else {
            return Err(DataFusionError::Plan("|| takes two operands".into()));
        };
        BinaryTypeCoercer::new(left, &Operator::StringConcat, right).get_result_type()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let [left, right] = &arrays[..] else {
            return Err(DataFusionError::Plan("|| takes two operands".into()));
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("l", left.data_type().clone(), true),
            Field::new("r", right.data_type().clone(), true),
        ]));
        let batch = RecordBatch::try_new(schema, vec![Arc::clone(left), Arc::clone(right)])?;
        let operator = BinaryExpr::new(
            Arc::new(Column::new("l", 0)),
            Operator::StringConcat,
            Arc::new(Column::new("r", 1)),
        );
        let result = operator.evaluate(&batch)?;
        match result {
            ColumnarValue::Array(array) if all_scalar => Ok(ColumnarValue::Scalar(
                datafusion::common::ScalarValue::try_from_array(&array, 0)?,
            )),
            other => Ok(other),
        }
    }
}

/// A function whose result is refused past `cap` bytes.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Bounded {
    inner: ScalarUDF,
    estimate: Estimate,
    cap: u64,
}

impl Bounded {
    fn refuse(&self, bytes: u64) -> DataFusionError {
        crate::error::value_too_large(self.inner.name().to_string(), bytes, self.cap)
    }
}

/// Per row, the values of an integer argument (0 where null or not an integer).
fn integers(value: &ColumnarValue, rows: usize) -> Vec<i64> {
    let Ok(array) = value.to_array(rows) else {
        return vec![0; rows];
    };
    match cast(&array, &DataType::Int64) {
        Ok(ints) => {
            let ints = ints.as_primitive::<Int64Type>();
            (0..rows)
                .map(|i| if ints.is_null(i) { 0 } else { ints.value(i) })
                .collect()
        }
        Err(_) => vec![0; rows],
    }
}

/// Per row, the bytes of an argument: a string's or binary's length, else the row's share of
/// the array's memory.
fn lengths(value: &ColumnarValue, rows: usize) -> Vec<u64> {
    let Ok(array) = value.to_array(rows) else {
        return vec![0; rows];
    };
    if let Ok(lengths) = length(&array)
        && let Ok(lengths) = cast(&lengths, &DataType::Int64)
    {
        let lengths = lengths.as_primitive::<Int64Type>();
        return (0..rows)
            .map(|i| {
                if lengths.is_null(i) {
                    0
                } else {
                    lengths.value(i).max(0) as u64
                }
            })
            .collect();
    }
    let share = (array.get_array_memory_size() / rows.max(1)).max(8) as u64;
    vec![share; rows]
}

fn positive(n: i64) -> u64 {
    n.max(0) as u64
}

impl Bounded {
    /// An upper bound of the bytes the call builds.
    fn estimate(&self, args: &ScalarFunctionArgs) -> u64 {
        let rows = args.number_rows.max(1);
        let arg = |i: usize| args.args.get(i);
        let sum = |values: Vec<u64>| values.into_iter().fold(0u64, u64::saturating_add);
        match self.estimate {
            Estimate::Repeat => match (arg(0), arg(1)) {
                (Some(text), Some(n)) => sum(lengths(text, rows)
                    .into_iter()
                    .zip(integers(n, rows))
                    .map(|(len, n)| len.saturating_mul(positive(n)))
                    .collect()),
                _ => 0,
            },
            Estimate::Pad => match arg(1) {
                Some(n) => sum(integers(n, rows)
                    .into_iter()
                    .map(|n| positive(n).saturating_mul(4))
                    .collect()),
                None => 0,
            },
            Estimate::ArrayRepeat => match (arg(0), arg(1)) {
                (Some(element), Some(n)) => sum(lengths(element, rows)
                    .into_iter()
                    .zip(integers(n, rows))
                    .map(|(len, n)| len.max(8).saturating_mul(positive(n)))
                    .collect()),
                _ => 0,
            },
            Estimate::Range => {
                let (start, stop) = match (arg(0), arg(1)) {
                    (Some(start), Some(stop)) => (integers(start, rows), integers(stop, rows)),
                    // range(stop)
                    (Some(stop), None) => (vec![0; rows], integers(stop, rows)),
                    _ => return 0,
                };
                let steps = arg(2).map_or(vec![1; rows], |step| integers(step, rows));
                sum((0..rows)
                    .map(|i| {
                        let span = (stop[i] as i128 - start[i] as i128).unsigned_abs();
                        let step = (steps[i] as i128).unsigned_abs().max(1);
                        let elements = (span / step + 1).min(u64::MAX as u128) as u64;
                        elements.saturating_mul(8)
                    })
                    .collect())
            }
            Estimate::ArrayResize => match arg(1) {
                Some(n) => sum(integers(n, rows)
                    .into_iter()
                    .map(|n| positive(n).saturating_mul(8))
                    .collect()),
                None => 0,
            },
            Estimate::Replace => match (arg(0), arg(1), arg(2)) {
                (Some(text), Some(from), Some(to)) => {
                    let (text, from, to) =
                        (lengths(text, rows), lengths(from, rows), lengths(to, rows));
                    sum((0..rows)
                        .map(|i| {
                            let matches = text[i] / from[i].max(1) + 1;
                            text[i].saturating_add(matches.saturating_mul(to[i]))
                        })
                        .collect())
                }
                _ => 0,
            },
            Estimate::RegexpReplace => match (arg(0), arg(2)) {
                (Some(text), Some(replacement)) => {
                    let (text, replacement) = (lengths(text, rows), lengths(replacement, rows));
                    sum((0..rows)
                        .map(|i| (text[i] + 1).saturating_mul(replacement[i] + 1))
                        .collect())
                }
                _ => 0,
            },
            Estimate::Concat | Estimate::ConcatWs => {
                let parts: Vec<u64> = args.args.iter().map(|a| sum(lengths(a, rows))).collect();
                let total = sum(parts.clone());
                match (self.estimate, parts.first()) {
                    (Estimate::ConcatWs, Some(separator)) => {
                        total.saturating_add(separator.saturating_mul(parts.len() as u64))
                    }
                    _ => total,
                }
            }
        }
    }
}

/// The bytes of a function's result.
fn result_bytes(value: &ColumnarValue) -> u64 {
    match value {
        ColumnarValue::Array(array) => array.get_array_memory_size() as u64,
        ColumnarValue::Scalar(scalar) => scalar.size() as u64,
    }
}

impl ScalarUDFImpl for Bounded {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn schema_name(&self, args: &[Expr]) -> DfResult<String> {
        self.inner.inner().schema_name(args)
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        self.inner.return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        self.inner.return_field_from_args(args)
    }

    fn is_strict(&self) -> bool {
        self.inner.inner().is_strict()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let estimate = self.estimate(&args);
        if estimate > self.cap {
            return Err(self.refuse(estimate));
        }
        let result = self.inner.invoke_with_args(args)?;
        let bytes = result_bytes(&result);
        if bytes > self.cap {
            return Err(self.refuse(bytes));
        }
        Ok(result)
    }

    fn short_circuits(&self) -> bool {
        self.inner.short_circuits()
    }

    fn output_ordering(&self, inputs: &[ExprProperties]) -> DfResult<SortProperties> {
        self.inner.output_ordering(inputs)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }
}
