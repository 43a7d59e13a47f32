//! Tests across the retrieval room: a search through a whole store, typos included.

use super::lookup::{search, Column, ValueStore};
use super::retrieve::{Candidate, Lookup};
use std::collections::HashSet;

/// A store that finds what the extension's SQL finds without its HNSW graph: the keys
/// equal to a lookup's, and the 8 keys either side of it in byte order, forwards and reversed.
struct Sorted {
    keys: Vec<(String, String)>,
    reversed: Vec<(String, String)>,
}

impl Sorted {
    fn new(values: &[String]) -> Sorted {
        let mut keys: Vec<(String, String)> = values.iter().map(|v| (crate::text::fold(v), v.clone())).collect();
        let mut reversed: Vec<(String, String)> = keys.iter().map(|(k, v)| (k.chars().rev().collect(), v.clone())).collect();
        keys.sort();
        reversed.sort();
        Sorted { keys, reversed }
    }
}

fn around(sorted: &[(String, String)], key: &str, n: usize) -> Vec<String> {
    let at = sorted.partition_point(|(k, _)| k.as_str() < key);
    let from = at.saturating_sub(n);
    sorted[from..(at + n + 1).min(sorted.len())].iter().map(|(_, v)| v.clone()).collect()
}

impl ValueStore for Sorted {
    fn candidates(&mut self, lookups: &[Lookup], _columns: &[u32], _limit: usize) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (i, l) in lookups.iter().enumerate() {
            let rev: String = l.text.chars().rev().collect();
            for v in around(&self.keys, &l.text, 8).into_iter().chain(around(&self.reversed, &rev, 8)) {
                out.push(Candidate { column: 1, term: v.clone(), value: v, cosine: None, trigram: None, phrase: i });
            }
        }
        out
    }
    fn nearest(&mut self, _lookups: &[Lookup], _columns: &[u32], _limit: usize) -> Vec<Candidate> {
        vec![]
    }
    fn exact(&mut self, keys: &[String], _columns: &[u32]) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            for (_, v) in self.keys.iter().filter(|(x, _)| x == k) {
                out.push(Candidate { column: 1, value: v.clone(), term: v.clone(), cosine: None, trigram: None, phrase: i });
            }
        }
        out
    }
    fn same_key(&mut self, _column: u32, _text: &str) -> Vec<String> {
        vec![]
    }
    fn pending(&mut self, _hits: &[(u32, String)]) -> HashSet<(u32, String)> {
        HashSet::new()
    }
    fn still_held(&mut self, _column: u32, _value: &str) -> bool {
        true
    }
}

#[test]
fn a_typo_is_found_among_values_sharing_each_of_its_words() {
    // 40 first names x 40 last names: every word is shared by 40 values, and every value's
    // byte-order neighbours share one of its words.
    let names = |head: &str, mid: &str, tail: &str| -> Vec<String> {
        (0..40u8).map(|i| format!("{head}{}{mid}{}{tail}", (b'a' + i % 26) as char, (b'a' + i / 26) as char)).collect()
    };
    let (first, last) = (names("Fa", "rn", "ld"), names("Lo", "mb", "rd"));
    let values: Vec<String> = first.iter().flat_map(|f| last.iter().map(move |l| format!("{f} {l}"))).collect();
    let mut store = Sorted::new(&values);
    let col = [Column { id: 1, recheck: false }];
    let target = "Fakrnbld Lohmbard";
    assert!(values.iter().any(|v| v == target));
    for typo in ["fakrbnld lohmbard", "fakrnbld lohmbadr", "fakrnbldlohmbard", "fakrnbld ohmbard", "fakrnbld lohmxard"] {
        let hits = search(&mut store, &[typo.to_string()], &[], &col, 5, 0.65);
        assert_eq!(hits.first().map(|h| h.value.as_str()), Some(target), "{typo}: {hits:?}");
    }
}
