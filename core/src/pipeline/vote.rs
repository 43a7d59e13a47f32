//! Self-consistency vote: candidates that return the same rows (in any column order) form a
//! group; the largest group wins, empty results lose to non-empty ones, ties go to the cheapest
//! plan (the planner's estimate) and then the fastest execution. The cheapest plan answers for
//! its group; among queries that return no rows, the one most samples wrote. Confidence is the
//! winning group's share of all candidates.

use crate::pipeline::results::Row;
use serde::Serialize;
use std::time::Duration;

/// One executed candidate as the vote sees it.
#[derive(Debug, Clone)]
pub struct Ballot {
    /// Index of the candidate in the caller's list.
    pub candidate: usize,
    pub rows: Vec<Row>,
    /// Whether the candidate's own SQL orders its rows (then order is part of its answer).
    pub ordered: bool,
    pub elapsed: Duration,
    /// The planner's estimated cost (None when unknown).
    pub cost: Option<f64>,
    /// How many samples this candidate answers for: itself, those that wrote the same query,
    /// those it corrected; 0 for one superseded by its own correction.
    pub weight: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// Candidates in the group, the one answering for it first (the cheapest plan, then the
    /// fastest; with no rows, the one most samples wrote first).
    pub candidates: Vec<usize>,
    pub votes: usize,
    pub rows: usize,
    /// The first candidate's execution time.
    pub fastest_ms: f64,
    /// The least estimated cost among its candidates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// The candidate to answer with: the first of the winning group.
    pub winner: usize,
    /// Groups, best first.
    pub groups: Vec<Group>,
    /// Votes of the winning group over all candidates (`total`).
    pub confidence: f64,
}

fn key(b: &Ballot) -> Vec<Row> {
    // `name, count` and `count, name` give one answer.
    let mut rows = crate::pipeline::results::canonical_columns(&b.rows, b.ordered);
    if !b.ordered {
        rows.sort();
    }
    rows
}

/// Votes among executed candidates; `total` counts every candidate, failed ones included.
/// None when nothing was executed.
pub fn vote(ballots: &[Ballot], total: usize) -> Option<Outcome> {
    let mut groups: Vec<(Vec<Row>, Vec<&Ballot>)> = Vec::new();
    for b in ballots {
        let k = key(b);
        match groups.iter_mut().find(|(gk, _)| *gk == k) {
            Some((_, members)) => members.push(b),
            None => groups.push((k, vec![b])),
        }
    }
    let mut out: Vec<Group> = groups
        .into_iter()
        .map(|(k, mut members)| {
            // The cheapest plan answers for the group (the query the user runs again), then the
            // fastest. Queries that return no rows agree on nothing but that: there the query
            // most samples wrote answers for them, then the cheapest.
            let empty = k.is_empty();
            members.sort_by(|x, y| {
                let written = if empty { y.weight.cmp(&x.weight) } else { std::cmp::Ordering::Equal };
                written
                    .then(x.cost.unwrap_or(f64::INFINITY).total_cmp(&y.cost.unwrap_or(f64::INFINITY)))
                    .then((x.elapsed, x.candidate).cmp(&(y.elapsed, y.candidate)))
            });
            Group {
                candidates: members.iter().map(|b| b.candidate).collect(),
                votes: members.iter().map(|b| b.weight).sum(),
                rows: k.len(),
                fastest_ms: members[0].elapsed.as_secs_f64() * 1000.0,
                cost: members.iter().filter_map(|b| b.cost).min_by(f64::total_cmp),
            }
        })
        .collect();
    // Non-empty before empty, then more votes, then the cheaper plan (a deterministic estimate),
    // then faster.
    let cost = |g: &Group| g.cost.unwrap_or(f64::INFINITY);
    out.sort_by(|a, b| {
        (a.rows == 0)
            .cmp(&(b.rows == 0))
            .then(b.votes.cmp(&a.votes))
            .then(cost(a).total_cmp(&cost(b)))
            .then(a.fastest_ms.total_cmp(&b.fastest_ms))
    });
    let first = out.first()?;
    let winner = first.candidates[0];
    let confidence = first.votes as f64 / total.max(first.votes) as f64;
    Some(Outcome { winner, groups: out, confidence })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: &[&str]) -> Vec<Row> {
        v.iter().map(|x| vec![Some(x.to_string())]).collect()
    }

    fn ballot(candidate: usize, r: &[&str], ms: u64) -> Ballot {
        Ballot { candidate, rows: rows(r), ordered: false, elapsed: Duration::from_millis(ms), cost: None, weight: 1 }
    }

    #[test]
    fn three_agreeing_beat_two() {
        let b = vec![
            ballot(0, &["6"], 5),
            ballot(1, &["7"], 1),
            ballot(2, &["6"], 4),
            ballot(3, &["7"], 2),
            ballot(4, &["6"], 3),
        ];
        let o = vote(&b, 5).expect("outcome");
        assert_eq!(o.groups[0].candidates, vec![4, 2, 0]);
        assert_eq!(o.winner, 4, "the fastest of the winning group");
        assert!((o.confidence - 0.6).abs() < 1e-9);
    }

    #[test]
    fn the_same_rows_in_another_column_order_agree() {
        let two = |candidate: usize, r: &[[&str; 2]]| Ballot {
            candidate,
            rows: r.iter().map(|x| x.iter().map(|v| Some(v.to_string())).collect()).collect(),
            ordered: false,
            elapsed: Duration::from_millis(1),
            cost: None,
            weight: 1,
        };
        let b = vec![
            two(0, &[["a", "1"], ["b", "2"]]),
            two(1, &[["2", "b"], ["1", "a"]]),
            two(2, &[["a", "2"], ["b", "1"]]),
        ];
        let o = vote(&b, 3).expect("outcome");
        assert_eq!(o.groups.len(), 2);
        assert_eq!(o.groups[0].votes, 2);
        assert!(o.groups[0].candidates.contains(&0) && o.groups[0].candidates.contains(&1));
    }

    #[test]
    fn empty_results_lose_to_non_empty() {
        let b = vec![ballot(0, &[], 1), ballot(1, &[], 1), ballot(2, &["x"], 9)];
        let o = vote(&b, 3).expect("outcome");
        assert_eq!(o.winner, 2);
        assert_eq!(o.groups[1].votes, 2);
    }

    #[test]
    fn among_empty_results_the_query_most_samples_wrote_answers() {
        // Three samples wrote candidate 1, one wrote the cheaper and faster candidate 0.
        let mut cheap = ballot(0, &[], 1);
        cheap.cost = Some(1.0);
        let mut written = ballot(1, &[], 9);
        written.cost = Some(50.0);
        written.weight = 3;
        let o = vote(&[cheap.clone(), written.clone()], 4).expect("outcome");
        assert_eq!((o.winner, o.groups[0].votes), (1, 4));
        // With rows, the same rows agree: the cheaper plan answers for them, whoever wrote more.
        cheap.rows = rows(&["x"]);
        written.rows = rows(&["x"]);
        assert_eq!(vote(&[cheap, written], 4).expect("outcome").winner, 0);
    }

    #[test]
    fn ties_go_to_the_faster() {
        let b = vec![ballot(0, &["a"], 9), ballot(1, &["b"], 2)];
        assert_eq!(vote(&b, 2).expect("outcome").winner, 1);
    }

    #[test]
    fn order_matters_only_when_the_sql_orders() {
        let mut a = ballot(0, &["1", "2"], 1);
        let mut b = ballot(1, &["2", "1"], 1);
        assert_eq!(vote(&[a.clone(), b.clone()], 2).expect("outcome").groups.len(), 1);
        a.ordered = true;
        b.ordered = true;
        assert_eq!(vote(&[a, b], 2).expect("outcome").groups.len(), 2);
    }

    #[test]
    fn duplicates_carry_their_weight_and_failures_lower_confidence() {
        let mut a = ballot(0, &["x"], 1);
        a.weight = 3;
        let o = vote(&[a, ballot(1, &["y"], 1)], 5).expect("outcome");
        assert_eq!((o.winner, o.groups[0].votes), (0, 3));
        assert!((o.confidence - 0.6).abs() < 1e-9);
        assert!(vote(&[], 3).is_none());
    }

    #[test]
    fn the_cheaper_plan_breaks_a_tie_before_time() {
        let mut slow_cheap = ballot(0, &["a"], 9);
        slow_cheap.cost = Some(10.0);
        let mut fast_dear = ballot(1, &["b"], 1);
        fast_dear.cost = Some(5000.0);
        let o = vote(&[fast_dear.clone(), slow_cheap.clone()], 2).expect("outcome");
        assert_eq!(o.winner, 0, "equal votes: the cheaper estimate wins");
        assert_eq!(o.groups[0].cost, Some(10.0));
        // Within a group the cheaper plan answers, even when it ran slower.
        let mut same = fast_dear;
        same.rows = slow_cheap.rows.clone();
        assert_eq!(vote(&[same, slow_cheap], 2).expect("outcome").winner, 0);
        // Unknown costs fall back to time.
        assert_eq!(vote(&[ballot(0, &["a"], 9), ballot(1, &["b"], 1)], 2).expect("outcome").winner, 1);
    }
}
