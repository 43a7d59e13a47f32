//! Whether a question is about anything the schema holds: its content words against the words of
//! the tables and columns the role may read, their descriptions, sampled and enumerated values,
//! and the instructions chosen for it. A question none of whose words the schema covers ("Which
//! planet is the largest in the solar system?" asked of a shop) is not answered with a query.

use crate::retrieval::{forms, instructions::content_words};
use crate::text;
use crate::schema::Schema;
use serde::Serialize;
use std::collections::HashSet;

/// Words that say how to ask (rank, compare, order) rather than what about: they never make a
/// question about a database, nor keep it from being about one.
const GENERIC: &[&str] = &[
    "ago", "alphabetical", "amount", "ascending", "average", "best", "biggest", "bottom", "calculate", "combined", "compute",
    "current", "day", "descending", "detail", "display", "earliest", "entry", "everything", "exist", "fewest", "first",
    "greatest", "highest", "info", "information", "known", "largest", "last", "latest", "least", "list", "longest",
    "lowest", "month", "newest", "oldest", "overall", "percent", "percentage", "rank", "ranked", "recent", "record",
    "row", "shortest", "smallest", "sum", "tell", "thing", "today", "top", "value", "week", "worst", "year", "youngest",
];

/// Fewest letters a question word needs to count as found inside a longer name
/// ("ticker" in sbtickersymbol), and a shared beginning to match ("independent", indepyear).
const MIN_INSIDE: usize = 4;
const MIN_PREFIX: usize = 5;
/// A word of at least MIN_TYPO letters this close to a schema word (one typo or transposition in
/// five or more letters) is that word misspelled ("sinegrs").
const MIN_TYPO: usize = 5;
const TYPO_SIMILARITY: f32 = 0.8;

/// The words a schema (and what else the question was shown) holds: folded words, and the
/// names whole, lowercase, for words found inside them.
#[derive(Debug, Default)]
pub struct Vocabulary {
    words: HashSet<String>,
    /// Whole names (for iteration) and the same as a set (to keep each once).
    names: Vec<String>,
    named: HashSet<String>,
}

impl Vocabulary {
    /// The names, descriptions and shown values of `schema`'s tables and columns.
    pub fn of_schema(schema: &Schema) -> Vocabulary {
        let mut v = Vocabulary::default();
        // A stranger's names cover nothing: she could name a table after any question's words.
        for t in schema.tables.iter().filter(|t| !t.is_strangers()) {
            crate::interrupt::check();
            v.add_name(&t.name);
            v.add_text(t.comment.as_deref().unwrap_or(""));
            for c in &t.columns {
                v.add_name(&c.name);
                v.add_text(c.comment.as_deref().unwrap_or(""));
                for e in &c.enum_values {
                    v.add_text(e);
                }
                if let Some(s) = &c.stats {
                    for value in s.values.iter().take(50) {
                        v.add_text(value);
                    }
                }
            }
        }
        v
    }

    /// A name: whole (lowercase) and its words.
    pub fn add_name(&mut self, name: &str) {
        let lower = name.to_lowercase();
        if lower.len() >= MIN_INSIDE && self.named.insert(lower.clone()) {
            self.names.push(lower);
        }
        self.add_text(&split_camel(name));
    }

    /// The words of a text, however long (each folded alone: fold reads a bounded prefix).
    pub fn add_text(&mut self, text: &str) {
        for raw in text.split(|c: char| !c.is_alphanumeric()).filter(|r| !r.is_empty()) {
            for w in text::words(&text::fold(raw)) {
                self.words.insert(forms::singular(w).unwrap_or_else(|| w.to_string()));
                self.words.insert(w.to_string());
            }
        }
    }

    /// Whether the vocabulary covers `word` (folded, singular): the same word, the word inside a
    /// longer name or word, a name or word inside it, one sharing its first MIN_PREFIX letters,
    /// or one it misspells.
    pub fn covers(&self, word: &str) -> bool {
        if self.words.contains(word) {
            return true;
        }
        let inside = |long: &str, short: &str| short.len() >= MIN_INSIDE && long.contains(short);
        let prefix = |a: &str, b: &str| a.len() >= MIN_PREFIX && b.len() >= MIN_PREFIX && a.as_bytes()[..MIN_PREFIX] == b.as_bytes()[..MIN_PREFIX];
        if self.names.iter().chain(&self.words).any(|n| inside(n, word) || inside(word, n) || prefix(n, word)) {
            return true;
        }
        let chars: Vec<char> = word.chars().collect();
        chars.len() >= MIN_TYPO
            && self.words.iter().any(|n| {
                n.len().abs_diff(word.len()) <= 1 && text::folded_edit_similarity(&chars, &n.chars().collect::<Vec<_>>()) >= TYPO_SIMILARITY
            })
    }
}

/// "sbTickerSymbol" as "sb Ticker Symbol": a camel-case name's words apart.
fn split_camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_uppercase() && prev_lower {
            out.push(' ');
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        out.push(c);
    }
    out
}

/// Which of a question's content words the vocabulary covers.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Coverage {
    pub covered: Vec<String>,
    pub uncovered: Vec<String>,
}

impl Coverage {
    /// Nothing the question names is in the schema: it has content words and none is covered.
    pub fn unrelated(&self) -> bool {
        self.covered.is_empty() && !self.uncovered.is_empty()
    }
}

/// The content words of `question` (numbers and GENERIC words left out), sorted, split by
/// whether `vocabulary` covers them.
pub fn coverage(question: &str, vocabulary: &Vocabulary) -> Coverage {
    let mut words: Vec<String> = content_words(question)
        .into_iter()
        .filter(|w| w.len() >= 3 && !w.chars().all(|c| c.is_ascii_digit()) && GENERIC.binary_search(&w.as_str()).is_err())
        .collect();
    words.sort();
    let mut out = Coverage::default();
    for w in words {
        crate::interrupt::check();
        if vocabulary.covers(&w) {
            out.covered.push(w);
        } else {
            out.uncovered.push(w);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::tests::sample_schema;

    fn vocab(names: &[&str]) -> Vocabulary {
        let mut v = Vocabulary::default();
        for n in names {
            v.add_name(n);
        }
        v
    }

    #[test]
    fn generic_words_are_sorted_for_binary_search() {
        assert!(GENERIC.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn questions_about_other_things_are_unrelated() {
        let v = Vocabulary::of_schema(&sample_schema());
        for q in ["Which planet is the largest in the solar system?", "Who wrote the novel 1984?", "What is dark matter and what evidence supports its existence?"] {
            let c = coverage(q, &v);
            assert!(c.unrelated(), "{q}: {c:?}");
        }
    }

    #[test]
    fn questions_naming_tables_columns_or_values_are_related() {
        let v = Vocabulary::of_schema(&sample_schema());
        for q in ["How many singers are there?", "Which country has the most male singers?", "Who was born in the Netherlands?"] {
            let c = coverage(q, &v);
            assert!(!c.unrelated(), "{q}: {c:?}");
        }
    }

    #[test]
    fn words_inside_names_and_shared_beginnings_count() {
        let v = vocab(&["sbTickerSymbol", "IndepYear", "employees"]);
        assert!(v.covers("ticker") && v.covers("symbol"));
        assert!(v.covers("independent"));
        assert!(v.covers("employee") && v.covers("employment"));
        assert!(!v.covers("planet"));
        // Words under three letters decide nothing, whatever the names hold.
        assert!(coverage("sb", &v) == Coverage::default());
        // One typo or transposition in a word of five letters or more.
        let v = vocab(&["singer", "stadium"]);
        assert!(v.covers("sinegr") && v.covers("stadum"));
        assert!(!v.covers("banana") && !v.covers("planet"));
        // Short words are never found inside names: "age" is not in "language".
        let v = vocab(&["language"]);
        assert!(!v.covers("age"));
    }

    #[test]
    fn numbers_generic_words_and_an_empty_question_decide_nothing() {
        let v = vocab(&["singer"]);
        let c = coverage("What are the top 3 in 2015?", &v);
        assert!(c.covered.is_empty() && c.uncovered.is_empty() && !c.unrelated(), "{c:?}");
        assert!(!coverage("", &v).unrelated());
    }

    #[test]
    fn words_late_in_a_long_text_count() {
        let mut v = Vocabulary::default();
        v.add_text(&format!("{} warehouse", "filler ".repeat(100)));
        assert!(v.covers("warehouse"));
    }

    #[test]
    fn camel_case_names_split() {
        assert_eq!(split_camel("sbTickerSymbol"), "sb Ticker Symbol");
        assert_eq!(split_camel("IndepYear"), "Indep Year");
        assert_eq!(split_camel("snake_case"), "snake_case");
    }
}
