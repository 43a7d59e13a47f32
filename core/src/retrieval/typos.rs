//! Typo corrections from the index's own words. A lookup's first candidates (nearest by the
//! index, and the keys next to it in byte order, forwards and reversed) bring words of stored
//! values that sort next to the lookup's words; a word one edit away from a word of the lookup
//! (a letter changed, added, dropped, or two swapped), or two stored words the lookup ran
//! together, make a corrected key that is then looked up exactly. This finds a mistyped value
//! among a million others that share each of its words, where an approximate nearest-neighbour
//! search gives up first.

use super::retrieve::Lookup;
use crate::retrieval::retrieve::Candidate;
use crate::text;
use std::collections::{HashMap, HashSet};

/// Words shorter than this are not corrected: too many stored words are one edit away.
pub const MIN_WORD_CHARS: usize = 4;
/// Run-together words are split only when each half has at least this many characters.
const MIN_SPLIT_CHARS: usize = 3;
/// Stored words one edit away kept per word of a lookup.
const PER_WORD: usize = 3;
/// Corrected keys looked up per search.
pub const MAX_CORRECTIONS: usize = 24;
/// Candidates whose words are read: the first ones, in the store's order.
const MAX_CANDIDATES_READ: usize = 4000;

/// A key to look up exactly, standing for `lookup` (an index into the lookups) with one word
/// corrected.
#[derive(Debug, Clone, PartialEq)]
pub struct Correction {
    pub lookup: usize,
    pub key: String,
}

/// Whether `a` and `b` are exactly one edit apart: one character substituted, inserted or
/// deleted, or two adjacent characters swapped. Linear.
pub fn one_edit_apart(a: &[char], b: &[char]) -> bool {
    if a == b || a.len().abs_diff(b.len()) > 1 {
        return false;
    }
    let p = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    match a.len().cmp(&b.len()) {
        std::cmp::Ordering::Greater => a[p + 1..] == b[p..],
        std::cmp::Ordering::Less => a[p..] == b[p + 1..],
        std::cmp::Ordering::Equal => {
            a[p + 1..] == b[p + 1..] || (p + 1 < a.len() && a[p] == b[p + 1] && a[p + 1] == b[p] && a[p + 2..] == b[p + 2..])
        }
    }
}

/// The word itself and the word less each one of its characters: two words one edit apart
/// share at least one of these.
fn deletions(word: &[char]) -> Vec<String> {
    let mut out = vec![word.iter().collect::<String>()];
    for i in 0..word.len() {
        out.push(word[..i].iter().chain(&word[i + 1..]).collect());
    }
    out
}

/// Corrected keys for `lookups` from the words of `candidates` (at most [`MAX_CORRECTIONS`]),
/// other than those in `tried`. A word of a lookup that is itself a stored word is left alone.
/// Linear in the candidates' words and the lookups' characters.
pub fn corrections(lookups: &[Lookup], candidates: &[Candidate], tried: &HashSet<String>) -> Vec<Correction> {
    // The stored words the first candidates hold.
    let mut stored: HashSet<String> = HashSet::new();
    let mut order: Vec<String> = Vec::new();
    for (n, c) in candidates.iter().take(MAX_CANDIDATES_READ).enumerate() {
        crate::interrupt::every(n, 256);
        for w in text::words(&text::fold(&c.term)) {
            if stored.insert(w.to_string()) {
                order.push(w.to_string());
            }
        }
    }
    if stored.is_empty() {
        return vec![];
    }
    // The lookups' words that are not stored words, by their deletions.
    let mut unknown: Vec<Vec<char>> = Vec::new();
    let mut by_deletion: HashMap<String, Vec<usize>> = HashMap::new();
    for l in lookups {
        for w in text::words(&l.text) {
            let chars: Vec<char> = w.chars().collect();
            if chars.len() < MIN_WORD_CHARS || stored.contains(w) || unknown.contains(&chars) {
                continue;
            }
            for d in deletions(&chars) {
                by_deletion.entry(d).or_default().push(unknown.len());
            }
            unknown.push(chars);
        }
    }
    // Stored words one edit away from each unknown word, in the candidates' order.
    let mut fixes: Vec<Vec<String>> = vec![Vec::new(); unknown.len()];
    for (n, s) in order.iter().enumerate() {
        crate::interrupt::every(n, 256);
        let chars: Vec<char> = s.chars().collect();
        if chars.len() + 1 < MIN_WORD_CHARS {
            continue;
        }
        let mut seen: Vec<usize> = Vec::new();
        for d in deletions(&chars) {
            for &u in by_deletion.get(&d).map(Vec::as_slice).unwrap_or(&[]) {
                if seen.contains(&u) {
                    continue;
                }
                seen.push(u);
                if fixes[u].len() < PER_WORD && one_edit_apart(&unknown[u], &chars) {
                    fixes[u].push(s.clone());
                }
            }
        }
    }
    let fixes_of = |w: &str| -> Vec<String> {
        let chars: Vec<char> = w.chars().collect();
        let mut out: Vec<String> = unknown.iter().position(|u| *u == chars).map(|u| fixes[u].clone()).unwrap_or_default();
        // Two stored words run together.
        if chars.len() >= 2 * MIN_SPLIT_CHARS && !stored.contains(w) {
            for k in MIN_SPLIT_CHARS..=chars.len() - MIN_SPLIT_CHARS {
                let (a, b): (String, String) = (chars[..k].iter().collect(), chars[k..].iter().collect());
                if stored.contains(&a) && stored.contains(&b) {
                    out.push(format!("{a} {b}"));
                }
            }
        }
        out
    };
    let known: HashSet<&str> = lookups.iter().map(|l| l.text.as_str()).collect();
    let mut out: Vec<Correction> = Vec::new();
    let mut keys: HashSet<String> = HashSet::new();
    for (i, l) in lookups.iter().enumerate() {
        let words: Vec<&str> = text::words(&l.text).collect();
        for (j, w) in words.iter().enumerate() {
            for fix in fixes_of(w) {
                if out.len() >= MAX_CORRECTIONS {
                    return out;
                }
                let mut fixed: Vec<&str> = words.clone();
                fixed[j] = fix.as_str();
                let key = fixed.join(" ");
                if !known.contains(key.as_str()) && !tried.contains(&key) && keys.insert(key.clone()) {
                    out.push(Correction { lookup: i, key });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars(s: &str) -> Vec<char> {
        s.chars().collect()
    }

    fn cand(term: &str) -> Candidate {
        Candidate { column: 1, value: term.to_string(), term: term.to_string(), cosine: None, trigram: None, phrase: 0 }
    }

    #[test]
    fn one_edit() {
        for (a, b) in [("paris", "parus"), ("paris", "pars"), ("paris", "parise"), ("paris", "pairs"), ("paris", "aparis"), ("ab", "ba")] {
            assert!(one_edit_apart(&chars(a), &chars(b)), "{a} {b}");
            assert!(one_edit_apart(&chars(b), &chars(a)), "{b} {a}");
        }
        for (a, b) in [("paris", "paris"), ("paris", "prias"), ("paris", "pa"), ("paris", "sirap"), ("abc", "cab")] {
            assert!(!one_edit_apart(&chars(a), &chars(b)), "{a} {b}");
        }
    }

    #[test]
    fn a_mistyped_word_is_replaced_by_a_stored_one() {
        let lookups = [Lookup::plain("eceedre dtayicce")];
        let got = corrections(&lookups, &[cand("Eceerde Aabbcc"), cand("Ecbecre Dtayicce")], &HashSet::new());
        let keys: Vec<&str> = got.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["eceerde dtayicce"]);
        assert_eq!(got[0].lookup, 0);
    }

    #[test]
    fn words_run_together_are_split() {
        let lookups = [Lookup::plain("losangeles")];
        let got = corrections(&lookups, &[cand("Los Gatos"), cand("Angeles Crest")], &HashSet::new());
        assert_eq!(got, [Correction { lookup: 0, key: "los angeles".into() }]);
    }

    #[test]
    fn stored_and_short_words_are_left_alone() {
        let lookups = [Lookup::plain("paris")];
        assert!(corrections(&lookups, &[cand("Paris"), cand("Parus")], &HashSet::new()).is_empty());
        // Short words: "rom" is not corrected to "rome".
        assert!(corrections(&[Lookup::plain("rom")], &[cand("Rome")], &HashSet::new()).is_empty());
    }

    #[test]
    fn corrections_are_bounded() {
        let terms: Vec<Candidate> = (0..500).map(|i| cand(&format!("wordx{i:03}"))).collect();
        let lookups: Vec<Lookup> = (0..100).map(|i| Lookup::plain(&format!("wordy{i:03}"))).collect();
        let got = corrections(&lookups, &terms, &HashSet::new());
        assert_eq!(got.len(), MAX_CORRECTIONS);
        // Keys already tried do not count: the next call brings the next ones.
        let tried: HashSet<String> = got.iter().map(|c| c.key.clone()).collect();
        let next = corrections(&lookups, &terms, &tried);
        assert_eq!(next.len(), MAX_CORRECTIONS);
        assert!(next.iter().all(|c| !tried.contains(&c.key)));
    }
}
