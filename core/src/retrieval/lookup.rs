//! Value lookups over a store that only fetches rows: which texts are looked up for a query
//! (its phrases and their other forms), how candidates become the values shown, which of them
//! must be re-checked against their table, and which stored value a literal should become.
//! The extension implements [`ValueStore`] with SQL; everything decided is decided here.

use crate::retrieval::embed;
use crate::retrieval::forms;
use crate::retrieval::retrieve::{self, Candidate, Hit};
use crate::retrieval::typos;
use crate::text::{self, edit_similarity};
use std::collections::{HashMap, HashSet};

pub use super::retrieve::Lookup;

/// A match through another form of a phrase ("french" finding "France") counts a little less
/// than a match of the phrase as written.
pub const FORM_MATCH: f32 = 0.95;
/// Other forms looked up per phrase.
pub const FORMS_PER_PHRASE: usize = 4;
/// Most texts looked up for one query, forms included.
pub const MAX_LOOKUPS: usize = 48;
/// Most values one search re-checks against their tables.
pub const MAX_RECHECKS: usize = 20;
/// Least score for a value that is not the literal up to case and accents to replace it.
pub const CLOSEST_MIN_SCORE: f32 = 0.9;
/// Candidates fetched per (looked-up text, column) for [`closest`].
const CLOSEST_CANDIDATES: usize = 20;

/// The texts to look up for a query's phrases: each phrase, then the other forms of each
/// (plural and singular, place and adjective, abbreviation and long form), at most
/// [`MAX_LOOKUPS`].
pub fn lookups(phrases: &[String]) -> Vec<Lookup> {
    let mut out: Vec<Lookup> = phrases.iter().map(|p| Lookup::plain(p)).collect();
    let mut seen: HashSet<String> = phrases.iter().cloned().collect();
    for p in phrases {
        for v in forms::variants(p, FORMS_PER_PHRASE) {
            if out.len() >= MAX_LOOKUPS {
                return out;
            }
            if seen.insert(v.clone()) {
                out.push(Lookup { text: v, query: p.clone(), weight: FORM_MATCH, nearest: false });
            }
        }
    }
    out
}

/// An indexed column a search may use.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub id: u32,
    /// Every value found must be re-checked against the table (a bulk change left the index
    /// unsure, or row-level security decides who sees what).
    pub recheck: bool,
}

/// What the extension fetches for a lookup; it decides nothing.
pub trait ValueStore {
    /// Candidates for `lookups` in `columns`: every entry whose folded text equals a lookup's,
    /// the entries next to it in byte order, values still waiting to be embedded, and, for the
    /// lookups whose [`Lookup::nearest`] is set, up to `limit` nearest entries per column by the
    /// index. [`Candidate::phrase`] indexes `lookups`.
    fn candidates(&mut self, lookups: &[Lookup], columns: &[u32], limit: usize) -> Vec<Candidate>;
    /// Only the nearest entries by the index, for the lookups whose [`Lookup::nearest`] is set.
    fn nearest(&mut self, lookups: &[Lookup], columns: &[u32], limit: usize) -> Vec<Candidate>;
    /// The entries of `columns` whose folded text equals one of `keys`; [`Candidate::phrase`]
    /// indexes `keys`.
    fn exact(&mut self, keys: &[String], columns: &[u32]) -> Vec<Candidate>;
    /// The whole values of `column` whose folded text equals `fold(text)` (at most a few).
    fn same_key(&mut self, column: u32, text: &str) -> Vec<String>;
    /// Which of these (column, value) pairs DML took from some row, waiting for a re-check.
    fn pending(&mut self, hits: &[(u32, String)]) -> HashSet<(u32, String)>;
    /// Whether a row the caller may see still holds `value` (read as the caller).
    fn still_held(&mut self, column: u32, value: &str) -> bool;
}

/// The best `k` values for a query's phrases in `columns`, at least `threshold`: looked up with
/// their other forms, ranked, and the doubtful ones re-checked (at most [`MAX_RECHECKS`]; a
/// value past that budget is left out rather than shown unchecked).
/// `words`: the question's words that may name a value ([`retrieve::query_words`]).
pub fn search(store: &mut impl ValueStore, phrases: &[String], words: &[String], columns: &[Column], k: usize, threshold: f32) -> Vec<Hit> {
    if phrases.is_empty() || columns.is_empty() || k == 0 {
        return vec![];
    }
    let lookups = lookups(phrases);
    let ids: Vec<u32> = columns.iter().map(|c| c.id).collect();
    let limit = (k * 4).max(20);
    let candidates = candidates(store, &lookups, &ids, limit);
    let ranked = retrieve::rank_in(words, &lookups, &candidates, threshold, usize::MAX);
    let by_id: HashMap<u32, &Column> = columns.iter().map(|c| (c.id, c)).collect();
    // Only the hits that could be shown are asked about.
    let shown: Vec<(u32, String)> = ranked.iter().take(k + MAX_RECHECKS).map(|h| (h.column, h.value.clone())).collect();
    let pending = store.pending(&shown);
    let mut out = Vec::new();
    let mut rechecks = 0usize;
    for hit in ranked.into_iter().take(k + MAX_RECHECKS) {
        let Some(col) = by_id.get(&hit.column) else { continue };
        if col.recheck || pending.contains(&(hit.column, hit.value.clone())) {
            rechecks += 1;
            if rechecks > MAX_RECHECKS || !store.still_held(hit.column, &hit.value) {
                continue;
            }
        }
        out.push(hit);
        if out.len() >= k {
            break;
        }
    }
    out
}

/// The store's candidates for `lookups`. First the exact entries and byte-order neighbours of
/// every lookup, and the keys that correct a typo in a lookup from the words of those
/// ([`typos::corrections`]), looked up exactly, attributed to the lookup they correct and scored
/// against it. Then the nearest entries by the index (a graph search, the costly read) only for
/// the phrases as the question writes them that nothing matched yet, exactly or corrected, in
/// whole or as part of a longer phrase that did (its words' near misses are other values); and
/// the corrections the words of those suggest.
fn candidates(store: &mut impl ValueStore, lookups: &[Lookup], columns: &[u32], limit: usize) -> Vec<Candidate> {
    let plain: Vec<Lookup> = lookups.iter().map(|l| Lookup { nearest: false, ..l.clone() }).collect();
    let mut found = store.candidates(&plain, columns, limit);
    let mut tried: HashSet<String> = HashSet::new();
    let mut named: HashSet<usize> = correct(store, lookups, columns, &mut found, &mut tried);
    for (n, c) in found.iter().enumerate() {
        crate::interrupt::every(n, 256);
        if !named.contains(&c.phrase) && lookups.get(c.phrase).is_some_and(|l| text::fold(&c.term) == l.text) {
            named.insert(c.phrase);
        }
    }
    let named: Vec<String> = named.iter().map(|i| format!(" {} ", lookups[*i].text)).collect();
    let fuzzy: Vec<Lookup> = lookups
        .iter()
        .map(|l| {
            let padded = format!(" {} ", l.text);
            Lookup { nearest: l.nearest && !named.iter().any(|n| n.contains(&padded)), ..l.clone() }
        })
        .collect();
    if fuzzy.iter().any(|l| l.nearest) {
        let more = store.nearest(&fuzzy, columns, limit);
        found.extend(more);
        correct(store, lookups, columns, &mut found, &mut tried);
    }
    found
}

/// Looks up the corrections the words of `found` suggest (other than `tried`), adds what they
/// find to `found`, and returns the lookups a correction found a value for.
fn correct(store: &mut impl ValueStore, lookups: &[Lookup], columns: &[u32], found: &mut Vec<Candidate>, tried: &mut HashSet<String>) -> HashSet<usize> {
    let fixes = typos::corrections(lookups, found, tried);
    let mut hit = HashSet::new();
    if fixes.is_empty() {
        return hit;
    }
    tried.extend(fixes.iter().map(|f| f.key.clone()));
    let keys: Vec<String> = fixes.iter().map(|f| f.key.clone()).collect();
    for mut c in store.exact(&keys, columns) {
        let Some((i, l)) = fixes.get(c.phrase).and_then(|f| lookups.get(f.lookup).map(|l| (f.lookup, l))) else { continue };
        c.phrase = i;
        c.trigram = Some(text::trigram_similarity(&l.text, &c.term));
        c.cosine = None;
        hit.insert(i);
        found.push(c);
    }
    hit
}

/// The stored value of `column` that `literal` should become, for the agent alignment. None
/// when `literal` is stored as written or nothing is close enough. The same value up to case,
/// accents and spacing wins when it is the only one; else (`fuzzy`: the index's scores are the
/// built-in embedder's) a whole value scoring at least [`CLOSEST_MIN_SCORE`] by the index and
/// by edit similarity (a typo). A doubtful value is re-checked.
pub fn closest(store: &mut impl ValueStore, column: &Column, literal: &str, fuzzy: bool) -> Option<String> {
    let same = store.same_key(column.id, literal);
    if same.iter().any(|v| v == literal) {
        return None;
    }
    let found = match same.as_slice() {
        [one] => one.clone(),
        [] if fuzzy => {
            let lookups = [Lookup::plain(literal)];
            let candidates = candidates(store, &lookups, &[column.id], CLOSEST_CANDIDATES);
            retrieve::rank(&lookups, &candidates, CLOSEST_MIN_SCORE, usize::MAX)
                .into_iter()
                .find(|h| h.value != literal && edit_similarity(&h.value, literal) >= CLOSEST_MIN_SCORE)?
                .value
        }
        _ => return None,
    };
    let doubtful = column.recheck || store.pending(&[(column.id, found.clone())]).contains(&(column.id, found.clone()));
    if doubtful && !store.still_held(column.id, &found) {
        return None;
    }
    Some(found)
}

/// Values waiting to be embedded (an endpoint embedder's queue) as candidates: those whose text
/// is close to a lookup by trigrams or spelling. Linear in lookups × values; callers bound both.
pub fn queued_candidates(lookups: &[Lookup], queued: &[(u32, String)], threshold: f32) -> Vec<Candidate> {
    let mut out = Vec::new();
    for (column, value) in queued {
        crate::interrupt::check();
        let folded = text::fold(value);
        for (i, l) in lookups.iter().enumerate() {
            let trigram = text::trigram_similarity(&l.text, &folded);
            if folded == l.text || trigram >= threshold || edit_similarity(&l.text, &folded) >= threshold {
                out.push(Candidate {
                    column: *column,
                    value: value.clone(),
                    term: value.clone(),
                    cosine: None,
                    trigram: Some(trigram),
                    phrase: i,
                });
            }
        }
    }
    out
}

/// A phrase shared by more than a tenth of a column's values (at least 2, at most 50) names
/// no value in particular ("airport" in a column of airport names) and is not indexed.
pub fn phrase_cap(values: usize) -> usize {
    (values / 10).clamp(2, 50)
}

/// Most phrases indexed per value.
pub const PHRASES_PER_VALUE: usize = 16;

/// The (value, term) entries of a column's values: each value as itself, and each of its
/// phrases that at most [`phrase_cap`] values share.
pub fn entries(values: &[String]) -> Vec<(String, String)> {
    let mut by_phrase: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, v) in values.iter().enumerate() {
        for p in embed::phrases(v, PHRASES_PER_VALUE) {
            by_phrase.entry(p).or_default().push(i);
        }
    }
    let mut rows: Vec<(String, String)> = values.iter().map(|v| (v.clone(), v.clone())).collect();
    let cap = phrase_cap(values.len());
    let mut shared: Vec<(String, Vec<usize>)> = by_phrase.into_iter().filter(|(_, owners)| owners.len() <= cap).collect();
    shared.sort_unstable();
    for (p, owners) in shared {
        rows.extend(owners.into_iter().map(|i| (values[i].clone(), p.clone())));
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store over a list of (column, value) pairs: every value of a column is a candidate
    /// for every lookup (scored by the core), `held` says which values rows still hold.
    struct Memory {
        values: Vec<(u32, String)>,
        pending: HashSet<(u32, String)>,
        gone: HashSet<(u32, String)>,
        rechecked: usize,
    }

    impl Memory {
        fn new(values: &[(u32, &str)]) -> Memory {
            Memory { values: values.iter().map(|(c, v)| (*c, v.to_string())).collect(), pending: HashSet::new(), gone: HashSet::new(), rechecked: 0 }
        }
    }

    impl ValueStore for Memory {
        fn candidates(&mut self, lookups: &[Lookup], columns: &[u32], _limit: usize) -> Vec<Candidate> {
            let mut out = Vec::new();
            for (i, _) in lookups.iter().enumerate() {
                for (c, v) in self.values.iter().filter(|(c, _)| columns.contains(c)) {
                    out.push(Candidate { column: *c, value: v.clone(), term: v.clone(), cosine: None, trigram: None, phrase: i });
                }
            }
            out
        }
        fn nearest(&mut self, lookups: &[Lookup], columns: &[u32], limit: usize) -> Vec<Candidate> {
            self.candidates(lookups, columns, limit)
        }
        fn exact(&mut self, keys: &[String], columns: &[u32]) -> Vec<Candidate> {
            let mut out = Vec::new();
            for (i, k) in keys.iter().enumerate() {
                for (c, v) in self.values.iter().filter(|(c, v)| columns.contains(c) && text::fold(v) == *k) {
                    out.push(Candidate { column: *c, value: v.clone(), term: v.clone(), cosine: None, trigram: None, phrase: i });
                }
            }
            out
        }
        fn same_key(&mut self, column: u32, text: &str) -> Vec<String> {
            self.values.iter().filter(|(c, v)| *c == column && text::fold(v) == text::fold(text)).map(|(_, v)| v.clone()).collect()
        }
        fn pending(&mut self, hits: &[(u32, String)]) -> HashSet<(u32, String)> {
            hits.iter().filter(|h| self.pending.contains(h)).cloned().collect()
        }
        fn still_held(&mut self, column: u32, value: &str) -> bool {
            self.rechecked += 1;
            !self.gone.contains(&(column, value.to_string()))
        }
    }

    /// Records which texts the graph search was asked for.
    struct Counting {
        inner: Memory,
        graph: Vec<String>,
    }

    impl ValueStore for Counting {
        fn candidates(&mut self, lookups: &[Lookup], columns: &[u32], limit: usize) -> Vec<Candidate> {
            assert!(lookups.iter().all(|l| !l.nearest), "the first round reads no graph");
            // Exact rows only, as the extension's first round returns them.
            let keys: Vec<String> = lookups.iter().map(|l| l.text.clone()).collect();
            let _ = limit;
            self.inner.exact(&keys, columns)
        }
        fn nearest(&mut self, lookups: &[Lookup], columns: &[u32], limit: usize) -> Vec<Candidate> {
            self.graph.extend(lookups.iter().filter(|l| l.nearest).map(|l| l.text.clone()));
            self.inner.candidates(lookups, columns, limit)
        }
        fn exact(&mut self, keys: &[String], columns: &[u32]) -> Vec<Candidate> {
            self.inner.exact(keys, columns)
        }
        fn same_key(&mut self, column: u32, text: &str) -> Vec<String> {
            self.inner.same_key(column, text)
        }
        fn pending(&mut self, hits: &[(u32, String)]) -> HashSet<(u32, String)> {
            self.inner.pending(hits)
        }
        fn still_held(&mut self, column: u32, value: &str) -> bool {
            self.inner.still_held(column, value)
        }
    }

    #[test]
    fn the_graph_is_searched_only_for_phrases_nothing_named_exactly() {
        let mut store = Counting { inner: Memory::new(&[(1, "Charles de Gaulle"), (1, "Zurich"), (1, "Lyon")]), graph: vec![] };
        let phrases: Vec<String> = ["charles de gaulle", "charles", "gaulle", "zurik"].iter().map(|s| s.to_string()).collect();
        let hits = search(&mut store, &phrases, &[], &[col(1)], 3, 0.65);
        let values: Vec<&str> = hits.iter().map(|h| h.value.as_str()).collect();
        assert!(values.contains(&"Charles de Gaulle") && values.contains(&"Zurich"), "{values:?}");
        // The exact phrase and its words need no graph search; the typo and its forms' phrase do.
        assert!(store.graph.iter().all(|t| !["charles de gaulle", "charles", "gaulle"].contains(&t.as_str())), "{:?}", store.graph);
        assert!(store.graph.contains(&"zurik".to_string()), "{:?}", store.graph);
        // Other forms are never graph-searched.
        assert!(store.graph.iter().all(|t| phrases.contains(t)), "{:?}", store.graph);
    }

    fn col(id: u32) -> Column {
        Column { id, recheck: false }
    }

    #[test]
    fn forms_find_values_stored_otherwise() {
        let mut store = Memory::new(&[(1, "France"), (1, "Germany"), (2, "Airline"), (3, "Saint Louis")]);
        let cols = [col(1), col(2), col(3)];
        let hits = search(&mut store, &["french".to_string()], &[], &cols, 3, 0.65);
        assert_eq!(hits[0].value, "France");
        assert_eq!(hits[0].matched, "french");
        assert!((hits[0].score - FORM_MATCH).abs() < 1e-6);
        let hits = search(&mut store, &["airlines".to_string()], &[], &cols, 3, 0.65);
        assert_eq!(hits[0].value, "Airline");
        let hits = search(&mut store, &["st louis".to_string()], &[], &cols, 3, 0.65);
        assert_eq!(hits[0].value, "Saint Louis");
    }

    #[test]
    fn a_phrase_as_written_beats_its_forms() {
        let mut store = Memory::new(&[(1, "Airline"), (1, "Airlines")]);
        let hits = search(&mut store, &["airlines".to_string()], &[], &[col(1)], 2, 0.65);
        assert_eq!(hits[0].value, "Airlines");
        assert_eq!(hits[0].score, 1.0);
    }

    #[test]
    fn doubtful_values_are_rechecked_within_a_budget() {
        let mut store = Memory::new(&[(1, "Aberdeen"), (1, "Abredeen")]);
        store.pending.insert((1, "Aberdeen".into()));
        store.gone.insert((1, "Aberdeen".into()));
        let hits = search(&mut store, &["aberdeen".to_string()], &[], &[col(1)], 2, 0.65);
        assert_eq!(hits.iter().map(|h| h.value.as_str()).collect::<Vec<_>>(), vec!["Abredeen"]);
        assert_eq!(store.rechecked, 1);
        // Every value of a column that must be re-checked; never more than the budget.
        let many: Vec<(u32, String)> = (0..100).map(|i| (1, format!("Town {i}"))).collect();
        let mut store = Memory { values: many, pending: HashSet::new(), gone: HashSet::new(), rechecked: 0 };
        let hits = search(&mut store, &["town".to_string()], &[], &[Column { id: 1, recheck: true }], 50, 0.1);
        assert_eq!(store.rechecked, MAX_RECHECKS);
        assert_eq!(hits.len(), MAX_RECHECKS);
    }

    #[test]
    fn closest_stored_value() {
        let mut store = Memory::new(&[(1, "ABERDEEN"), (1, "Glasgow Central"), (2, "Paris"), (2, "PARIS")]);
        // Stored as written: nothing to change.
        assert_eq!(closest(&mut store, &col(1), "Glasgow Central", true), None);
        // The only value equal up to case.
        assert_eq!(closest(&mut store, &col(1), "aberdeen", true).as_deref(), Some("ABERDEEN"));
        // A typo, only with the built-in embedder's scores.
        assert_eq!(closest(&mut store, &col(1), "Glasgow Cnetral", true).as_deref(), Some("Glasgow Central"));
        assert_eq!(closest(&mut store, &col(1), "Glasgow Cnetral", false), None);
        // Two values equal up to case: no way to choose.
        assert_eq!(closest(&mut store, &col(2), "paris", true), None);
        // Far from everything.
        assert_eq!(closest(&mut store, &col(1), "Inverness", true), None);
        // A value no row holds any more is not proposed.
        store.pending.insert((1, "ABERDEEN".into()));
        store.gone.insert((1, "ABERDEEN".into()));
        assert_eq!(closest(&mut store, &col(1), "aberdeen", true), None);
    }

    #[test]
    fn lookups_are_bounded_and_keep_phrases_first() {
        let phrases: Vec<String> = (0..30).map(|i| format!("cities {i}x")).chain(["french".to_string()]).collect();
        let l = lookups(&phrases);
        assert!(l.len() <= MAX_LOOKUPS);
        assert_eq!(l[0], Lookup::plain("cities 0x"));
        let l = lookups(&["french".to_string()]);
        assert!(l.iter().any(|x| x.text == "france" && x.query == "french" && x.weight == FORM_MATCH));
    }

    #[test]
    fn queued_values_match_by_text() {
        let l = [Lookup::plain("aberdeen")];
        let q = vec![(1, "Aberdeen".to_string()), (1, "Zurich".to_string()), (2, "Abredeen".to_string())];
        let c = queued_candidates(&l, &q, 0.3);
        let values: Vec<&str> = c.iter().map(|c| c.value.as_str()).collect();
        assert_eq!(values, vec!["Aberdeen", "Abredeen"]);
        let hits = retrieve::rank(&l, &c, 0.65, 5);
        assert_eq!(hits[0].value, "Aberdeen");
    }

    #[test]
    fn entries_cap_shared_phrases() {
        let mut values: Vec<String> = (0..30).map(|i| format!("Airport {i} North")).collect();
        values.push("Aberdeen Airport".into());
        let rows = entries(&values);
        // "airport" is shared by every value: not indexed; "aberdeen" is.
        assert!(!rows.iter().any(|(_, t)| t == "airport"));
        assert!(rows.iter().any(|(v, t)| v == "Aberdeen Airport" && t == "aberdeen"));
        assert_eq!(rows.iter().filter(|(v, t)| v == t).count(), values.len());
        assert_eq!(phrase_cap(5), 2);
        assert_eq!(phrase_cap(10_000), 50);
    }
}
