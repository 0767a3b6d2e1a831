//! The plans our operators hold that are not their children: the team barrier's scan
//! ([`TeamRowsExec`], hidden so that no optimizer moves a filter or a limit across the barrier)
//! and the GPU-hours step's reads ([`GpuHoursExec`], one pair per partition, travelling with
//! it). Whatever must see every operator of a plan — a worker's check that a plan only reads
//! the lake, a time limit's guard — reaches them through here, the one place that knows which
//! operators hide inputs.

use std::sync::Arc;

use datafusion::error::Result as DfResult;
use datafusion::physical_plan::ExecutionPlan;

use crate::gpu_hours_exec::GpuHoursExec;
use crate::scope::TeamRowsExec;

/// The plans `plan` holds but does not list as children.
pub(crate) fn hidden_inputs(plan: &dyn ExecutionPlan) -> Vec<&Arc<dyn ExecutionPlan>> {
    if let Some(barrier) = plan.downcast_ref::<TeamRowsExec>() {
        return vec![barrier.input()];
    }
    if let Some(gpu_hours) = plan.downcast_ref::<GpuHoursExec>() {
        return gpu_hours.reads().collect();
    }
    Vec::new()
}

/// `plan` with `f` applied to each of its hidden inputs, or `None` when it has none.
pub(crate) fn map_hidden_inputs(
    plan: &dyn ExecutionPlan,
    mut f: impl FnMut(Arc<dyn ExecutionPlan>) -> DfResult<Arc<dyn ExecutionPlan>>,
) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
    if let Some(barrier) = plan.downcast_ref::<TeamRowsExec>() {
        let input = f(Arc::clone(barrier.input()))?;
        return Ok(Some(Arc::new(barrier.with_input(input)?)));
    }
    if let Some(gpu_hours) = plan.downcast_ref::<GpuHoursExec>() {
        return Ok(Some(Arc::new(gpu_hours.map_reads(f)?)));
    }
    Ok(None)
}
