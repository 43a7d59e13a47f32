//! nl2sql.compare_results(): the evaluation harness's judge, and the same rule the vote uses.

#[pgrx::pg_schema]
mod nl2sql {
    use crate::pg::sandbox;
    use nl2sql_core::error::Diagnostic;
    use nl2sql_core::pipeline::Rejected;
    use nl2sql_core::prompt::refine::Failure;
    use nl2sql_core::pipeline::results;
    use nl2sql_core::Execution;
    use pgrx::prelude::*;
    use serde_json::{json, Value};

    /// Runs `reference` and `predicted` in the sandbox (each `repeat` times, for timing) and
    /// says whether they give the same rows: as lists when the reference has a top-level
    /// ORDER BY, else as multisets, values by their text form; `match` with the columns in the
    /// reference's order, `match_any_column_order` in any (Spider's execution accuracy).
    #[pg_extern(volatile, parallel_unsafe)]
    fn compare_results(
        reference: &str,
        predicted: &str,
        repeat: default!(i32, 1),
        max_rows: default!(i32, 100000),
    ) -> pgrx::JsonB {
        let repeat = repeat.clamp(1, 1000) as usize;
        let max_rows = max_rows.max(1) as usize;
        let ordered = results::orders_rows(reference).unwrap_or(false);
        let (gold, gold_json) = timed(reference, repeat, max_rows);
        let (pred, pred_json) = timed(predicted, repeat, max_rows);
        let judge = |same: fn(&[results::Row], &[results::Row], bool) -> bool| match (&gold, &pred) {
            (Some(g), Some(p)) => Value::Bool(!g.truncated && !p.truncated && same(&g.rows, &p.rows, ordered)),
            (None, _) => Value::Null,
            (Some(_), None) => Value::Bool(false),
        };
        let (matched, any_order) = (judge(results::same_rows), judge(results::same_rows_any_column_order));
        pgrx::JsonB(json!({
            "match": matched, "match_any_column_order": any_order, "ordered": ordered,
            "reference": gold_json, "predicted": pred_json
        }))
    }

    /// The columns `sql` compares with string literals, and the literals (for value recall).
    #[pg_extern(immutable, strict, parallel_safe)]
    fn sql_literals(sql: &str) -> TableIterator<'static, (name!(column_name, String), name!(literal, String))> {
        TableIterator::new(nl2sql_core::sqlinfo::string_comparisons(sql).into_iter().map(|c| (c.column, c.literal)))
    }

    /// Executes `sql` `repeat` times; the rows of the first run and the median time in ms.
    fn timed(sql: &str, repeat: usize, max_rows: usize) -> (Option<Execution>, Value) {
        let mut times = Vec::with_capacity(repeat);
        let mut first: Option<Execution> = None;
        for _ in 0..repeat {
            // The judge runs the reference query too: no cost limit.
            let limits = sandbox::Limits { max_rows, max_cost: None, ..sandbox::Limits::from_settings() };
            match sandbox::execute(sql, limits) {
                Ok(e) => {
                    times.push(e.elapsed.as_secs_f64() * 1000.0);
                    if first.is_none() {
                        first = Some(e);
                    }
                }
                Err(rejected) => {
                    let (state, msg) = match &rejected {
                        Rejected::Refused(e) => (e.sqlstate().code().to_string(), e.message()),
                        Rejected::Failed(Failure::Execution(r) | Failure::Analysis(r)) => {
                            (r.sqlstate.code().to_string(), r.message.clone())
                        }
                        Rejected::Failed(Failure::Timeout { ms }) => ("57014".into(), format!("ran longer than {ms} ms")),
                        Rejected::Failed(Failure::Syntax(e)) => (e.sqlstate().code().to_string(), e.message()),
                        // sandbox::execute never reports an empty result as a failure.
                        Rejected::Failed(f @ Failure::Empty) => ("00000".into(), f.summary()),
                        Rejected::Failed(f @ Failure::Cost { .. }) => ("53400".into(), f.summary()),
                    };
                    return (None, json!({"error": msg, "sqlstate": state}));
                }
            }
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        let rows = first.as_ref().map(|e| e.rows.len()).unwrap_or(0);
        let truncated = first.as_ref().is_some_and(|e| e.truncated);
        (first, json!({"rows": rows, "ms": median, "truncated": truncated}))
    }
}
