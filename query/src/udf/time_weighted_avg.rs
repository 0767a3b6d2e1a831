//! `time_weighted_avg(value, ts, max_gap_seconds)`: the time-weighted average of a sampled gauge
//! (SM activity, power, memory) within each group, with gaps in the telemetry left out.
//!
//! Samples arrive unsorted and spread over partitions, so each group keeps its `(ts, value)`
//! pairs (the partial state is the two lists), and sorts them only to average.

use std::mem::size_of;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int64Array, ListArray, RecordBatch,
};
use arrow::buffer::OffsetBuffer;
use arrow::datatypes::{
    DataType, Field, FieldRef, Float64Type, Int64Type, TimeUnit, TimestampMicrosecondType,
};
use datafusion::common::{Result, ScalarValue, internal_err, not_impl_err, plan_err};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::{AggregateOrderSensitivity, format_state_name};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, ColumnarValue, Documentation, EmitTo, GroupsAccumulator,
    Signature, TIMEZONE_WILDCARD, Volatility,
};
use datafusion_macros::user_doc;
use gpuledger_ledger::time::{MICROS_PER_SECOND, Micros};
use gpuledger_ledger::usage::time_weighted_average;

#[user_doc(
    doc_section(label = "Ledger Functions"),
    description = "Time-weighted average of a sampled gauge within each group. Each sample's \
        value holds from its ts until the next sample's ts, but for at most max_gap_seconds: \
        beyond that is a gap in the telemetry that counts for nothing (a missing hour is not an \
        idle hour). The last sample of a group holds for max_gap_seconds, as a sample does in \
        the ledger's gpu_hours (max sample gap 120 s by default). Samples at the same ts share \
        its holding. Rows with a NULL value or ts are skipped; NULL for a group without samples. \
        Input order does not matter.",
    syntax_example = "time_weighted_avg(value, ts, max_gap_seconds)",
    sql_example = r#"```sql
> select gpu_uuid, time_weighted_avg(sm_active, ts, 120) as sm_active
  from gpu_samples
  where ts >= timestamp '2025-01-06 00:00:00' and ts < timestamp '2025-01-07 00:00:00'
  group by gpu_uuid;
```"#,
    argument(
        name = "value",
        description = "The sampled gauge, e.g. sm_active or power_w."
    ),
    argument(
        name = "ts",
        description = "The sample's time; any precision and time zone (none is read as UTC)."
    ),
    argument(
        name = "max_gap_seconds",
        description = "A positive constant: the longest a sample stands for when the next one does not come sooner."
    )
)]
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TimeWeightedAvg {
    signature: Signature,
}

impl Default for TimeWeightedAvg {
    fn default() -> Self {
        let timestamp = DataType::Timestamp(TimeUnit::Microsecond, Some(TIMEZONE_WILDCARD.into()));
        Self {
            signature: Signature::exact(
                vec![DataType::Float64, timestamp, DataType::Float64],
                Volatility::Immutable,
            ),
        }
    }
}

impl AggregateUDFImpl for TimeWeightedAvg {
    fn name(&self) -> &str {
        "time_weighted_avg"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let list = |state: &str, item: DataType| -> FieldRef {
            Arc::new(Field::new(
                format_state_name(args.name, state),
                DataType::new_list(item, false),
                true,
            ))
        };
        Ok(vec![
            list("ts", DataType::Int64),
            list("value", DataType::Float64),
        ])
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(TimeWeightedAvgAccumulator(SampleGroups::new(
            max_gap(&args)?,
            1,
        ))))
    }

    fn groups_accumulator_supported(&self, _args: AccumulatorArgs) -> bool {
        true
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        Ok(Box::new(SampleGroups::new(max_gap(&args)?, 0)))
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        AggregateOrderSensitivity::Insensitive
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.doc()
    }
}

/// The `max_gap_seconds` argument, which must be the same for every row: a positive constant.
fn max_gap(args: &AccumulatorArgs) -> Result<Micros> {
    if args.is_distinct {
        return not_impl_err!("time_weighted_avg(DISTINCT …): every sample counts for its time");
    }
    let no_rows = RecordBatch::new_empty(Arc::new(args.schema.clone()));
    let seconds = match args.exprs[2].evaluate(&no_rows)? {
        ColumnarValue::Scalar(ScalarValue::Float64(Some(seconds))) => seconds,
        ColumnarValue::Scalar(other) => {
            return plan_err!("time_weighted_avg: max_gap_seconds must not be {other}");
        }
        ColumnarValue::Array(_) => {
            return plan_err!(
                "time_weighted_avg: max_gap_seconds must be a constant, not a column"
            );
        }
    };
    let micros = (seconds * MICROS_PER_SECOND as f64).round();
    if !(1.0..=Micros::MAX as f64).contains(&micros) {
        return plan_err!(
            "time_weighted_avg: max_gap_seconds must be a positive number of seconds, got {seconds}"
        );
    }
    Ok(micros as Micros)
}

type Sample = (Micros, f64);

/// The samples of each group in arrival order.
#[derive(Debug)]
struct SampleGroups {
    max_gap: Micros,
    groups: Vec<Vec<Sample>>,
    /// Samples held over all groups, so that `size` need not visit every group.
    samples: usize,
}

impl SampleGroups {
    fn new(max_gap: Micros, groups: usize) -> Self {
        Self {
            max_gap,
            groups: vec![Vec::new(); groups],
            samples: 0,
        }
    }

    /// Adds the input samples, each to the group `group_of(row)`.
    fn add_rows(
        &mut self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
        total_groups: usize,
        group_of: impl Fn(usize) -> usize,
    ) -> Result<()> {
        self.groups.resize(total_groups, Vec::new());
        for (row, sample) in input_samples(values, opt_filter)? {
            self.groups[group_of(row)].push(sample);
            self.samples += 1;
        }
        Ok(())
    }

    /// Adds partial states (the `ts` and `value` lists), row `i` to the group `group_of(i)`.
    fn add_states(
        &mut self,
        states: &[ArrayRef],
        total_groups: usize,
        group_of: impl Fn(usize) -> usize,
    ) -> Result<()> {
        let (Some(ts), Some(value)) = (
            states[0].as_list_opt::<i32>(),
            states[1].as_list_opt::<i32>(),
        ) else {
            return internal_err!("time_weighted_avg: partial state is not two lists");
        };
        let (Some(ts_items), Some(value_items)) = (
            ts.values().as_primitive_opt::<Int64Type>(),
            value.values().as_primitive_opt::<Float64Type>(),
        ) else {
            return internal_err!("time_weighted_avg: partial state lists of the wrong type");
        };
        self.groups.resize(total_groups, Vec::new());
        let (time_offsets, value_offsets) = (ts.value_offsets(), value.value_offsets());
        for row in (0..ts.len()).filter(|&row| ts.is_valid(row) && value.is_valid(row)) {
            let times = time_offsets[row] as usize..time_offsets[row + 1] as usize;
            let values = value_offsets[row] as usize..value_offsets[row + 1] as usize;
            if times.len() != values.len() {
                return internal_err!("time_weighted_avg: partial state lists of unequal length");
            }
            self.samples += times.len();
            let samples = ts_items.values()[times]
                .iter()
                .copied()
                .zip(value_items.values()[values].iter().copied());
            self.groups[group_of(row)].extend(samples);
        }
        Ok(())
    }

    /// Hands over the groups `emit_to` names.
    fn take(&mut self, emit_to: EmitTo) -> Vec<Vec<Sample>> {
        let taken = emit_to.take_needed(&mut self.groups);
        self.samples -= taken.iter().map(Vec::len).sum::<usize>();
        taken
    }

    fn size(&self) -> usize {
        size_of::<Self>()
            + self.groups.capacity() * size_of::<Vec<Sample>>()
            + self.samples * size_of::<Sample>()
    }
}

/// The samples among the input rows `(value, ts, max_gap_seconds)` with their row: rows with a
/// value and a time that pass the filter.
fn input_samples<'a>(
    values: &'a [ArrayRef],
    opt_filter: Option<&'a BooleanArray>,
) -> Result<impl Iterator<Item = (usize, Sample)> + 'a> {
    let (Some(value), Some(ts)) = (
        values[0].as_primitive_opt::<Float64Type>(),
        values[1].as_primitive_opt::<TimestampMicrosecondType>(),
    ) else {
        return internal_err!("time_weighted_avg: arguments not coerced to the signature");
    };
    let selected = move |row: usize| opt_filter.is_none_or(|f| f.is_valid(row) && f.value(row));
    Ok((0..value.len())
        .filter(move |&row| selected(row) && value.is_valid(row) && ts.is_valid(row))
        .map(|row| (row, (ts.value(row), value.value(row)))))
}

/// Sorts `samples` by time (then by value, so that sums do not depend on arrival order) and
/// averages them.
fn average(samples: &mut [Sample], max_gap: Micros) -> Option<f64> {
    samples.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    time_weighted_average(samples, max_gap)
}

/// The partial state of `groups`: a `ts` list and a `value` list per group.
fn state_lists(groups: &[Vec<Sample>]) -> Vec<ArrayRef> {
    let offsets = OffsetBuffer::from_lengths(groups.iter().map(Vec::len));
    lists(offsets, groups.iter().flatten().copied())
}

/// The `ts` and `value` lists of `samples`, cut into rows by `offsets`.
fn lists(
    offsets: OffsetBuffer<i32>,
    samples: impl Iterator<Item = Sample> + Clone,
) -> Vec<ArrayRef> {
    let ts: Int64Array = samples.clone().map(|(ts, _)| ts).collect();
    let value: Float64Array = samples.map(|(_, v)| v).collect();
    let list = |items: ArrayRef| -> ArrayRef {
        let item = Arc::new(Field::new_list_field(items.data_type().clone(), false));
        Arc::new(ListArray::new(item, offsets.clone(), items, None))
    };
    vec![list(Arc::new(ts)), list(Arc::new(value))]
}

impl GroupsAccumulator for SampleGroups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.add_rows(values, opt_filter, total_num_groups, |row| {
            group_indices[row]
        })
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.add_states(values, total_num_groups, |row| group_indices[row])
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(state_lists(&self.take(emit_to)))
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let averages: Float64Array = self
            .take(emit_to)
            .iter_mut()
            .map(|samples| average(samples, self.max_gap))
            .collect();
        Ok(Arc::new(averages))
    }

    /// Each input row as its own partial state, for when grouping does not reduce the rows.
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let mut lengths = vec![0; values[0].len()];
        let mut samples = Vec::new();
        for (row, sample) in input_samples(values, opt_filter)? {
            lengths[row] = 1;
            samples.push(sample);
        }
        Ok(lists(
            OffsetBuffer::from_lengths(lengths),
            samples.into_iter(),
        ))
    }

    fn size(&self) -> usize {
        SampleGroups::size(self)
    }
}

/// The same for an aggregate without GROUP BY, or over a window: one group.
#[derive(Debug)]
struct TimeWeightedAvgAccumulator(SampleGroups);

impl Accumulator for TimeWeightedAvgAccumulator {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.0.add_rows(values, None, 1, |_| 0)
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.0.add_states(states, 1, |_| 0)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        state_lists(&self.0.groups)
            .iter()
            .map(|list| ScalarValue::try_from_array(list, 0))
            .collect()
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let SampleGroups {
            max_gap, groups, ..
        } = &mut self.0;
        Ok(ScalarValue::Float64(average(&mut groups[0], *max_gap)))
    }

    fn size(&self) -> usize {
        self.0.size()
    }
}

#[cfg(test)]
mod tests;
