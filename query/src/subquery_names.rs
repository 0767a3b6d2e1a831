//! Scalar subqueries whose value is named like a column of the query around them.
//!
//! A distributed session plans an uncorrelated scalar subquery as a join against the subquery,
//! qualified `__scalar_sq_N` (datafusion-distributed turns DataFusion's physical subquery off:
//! its result cannot cross a stage). When the subquery's value has the name of an unqualified
//! column of the outer plan, the joined schema holds
//! `__scalar_sq_1."sum(gpu_hours.cost)"` beside `"sum(gpu_hours.cost)"` and planning fails with
//! "would be ambiguous":
//!
//! ```sql
//! SELECT team, sum(cost) / (SELECT sum(cost) FROM gpu_hours) FROM gpu_hours GROUP BY team
//! ```
//!
//! [`NameScalarSubqueryValues`] runs before the optimizer and gives each scalar subquery's value
//! a name of its own, which no column of a query can have by accident; the value and the
//! subquery are otherwise unchanged. Every session runs it, so that a query plans the same with
//! workers and without.

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, Result as DfResult};
use datafusion::config::ConfigOptions;
use datafusion::logical_expr::expr_rewriter::NamePreserver;
use datafusion::logical_expr::{Expr, LogicalPlan, LogicalPlanBuilder, Subquery};
use datafusion::optimizer::AnalyzerRule;

/// The name each scalar subquery's value gets.
const VALUE_NAME: &str = "scalar subquery value";

#[derive(Debug, Default)]
pub struct NameScalarSubqueryValues;

impl AnalyzerRule for NameScalarSubqueryValues {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> DfResult<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            // The expressions around a subquery keep their names (a column `round(…)` of the
            // answer is not renamed after the subquery's value).
            let names = NamePreserver::new(&node);
            let node = node.map_expressions(|expr| {
                let name = names.save(&expr);
                expr.transform_up(|expr| match expr {
                    Expr::ScalarSubquery(subquery) => named(subquery),
                    other => Ok(Transformed::no(other)),
                })
                .map(|transformed| transformed.update_data(|expr| name.restore(expr)))
            })?;
            if node.transformed {
                node.map_data(LogicalPlan::recompute_schema)
            } else {
                Ok(node)
            }
        })
        .map(|transformed| transformed.data)
    }

    fn name(&self) -> &str {
        "name_scalar_subquery_values"
    }
}

/// `subquery` with its one value named [`VALUE_NAME`].
fn named(subquery: Subquery) -> DfResult<Transformed<Expr>> {
    let schema = subquery.subquery.schema();
    if schema.fields().len() != 1 || schema.field(0).name() == VALUE_NAME {
        // Not ours to fix: DataFusion reports a subquery of several columns itself.
        return Ok(Transformed::no(Expr::ScalarSubquery(subquery)));
    }
    let value = Expr::Column(Column::from(schema.qualified_field(0)));
    let plan = LogicalPlanBuilder::from(subquery.subquery.as_ref().clone())
        .project(vec![value.alias(VALUE_NAME)])?
        .build()?;
    Ok(Transformed::yes(Expr::ScalarSubquery(
        subquery.with_plan(std::sync::Arc::new(plan)),
    )))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::prelude::SessionContext;

    use super::*;

    fn session(named: bool) -> SessionContext {
        let ctx = SessionContext::new();
        if named {
            ctx.add_analyzer_rule(Arc::new(NameScalarSubqueryValues));
        }
        let schema = Arc::new(Schema::new(vec![
            Field::new("team", DataType::Utf8, false),
            Field::new("cost", DataType::Float64, false),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["ads", "ads", "nlp"])),
                Arc::new(Float64Array::from(vec![1.0, 2.0, 5.0])),
            ],
        )
        .unwrap();
        ctx.register_batch("t", batch).unwrap();
        ctx
    }

    async fn rows(ctx: &SessionContext, sql: &str) -> DfResult<String> {
        let batches = ctx.sql(sql).await?.collect().await?;
        Ok(arrow::util::pretty::pretty_format_batches(&batches)?.to_string())
    }

    /// An uncorrelated subquery planned as a join (as a distributed session plans it) whose
    /// value is named like the outer aggregate: DataFusion's own planning fails; named, each
    /// team's part of the whole.
    #[tokio::test]
    async fn an_uncorrelated_value_planned_as_a_join_plans() {
        let sql = "SELECT team, sum(cost) / (SELECT sum(cost) FROM t) AS part \
                   FROM t GROUP BY team ORDER BY team";
        for named in [false, true] {
            let ctx = session(named);
            ctx.state_ref()
                .write()
                .config_mut()
                .options_mut()
                .optimizer
                .enable_physical_uncorrelated_scalar_subquery = false;
            let answer = rows(&ctx, sql).await;
            if !named {
                assert!(answer.unwrap_err().to_string().contains("ambiguous"));
                continue;
            }
            let table = answer.unwrap();
            assert_eq!(
                table
                    .lines()
                    .filter(|l| l.starts_with("| "))
                    .collect::<Vec<_>>(),
                ["| team | part  |", "| ads  | 0.375 |", "| nlp  | 0.625 |"]
            );
        }
    }
}
