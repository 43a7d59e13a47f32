//! Instructions: the definitions and rules curators store once per database ("ADV is the average
//! daily volume of a ticker", "revenue excludes refunds"), chosen per question by its words and
//! by meaning, and shown to the model beside the question. They are curator-written text: shown,
//! never run or spliced into SQL.

use crate::retrieval::{embed, forms, retrieve};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// Longest instruction text accepted, in characters.
pub const MAX_TEXT_CHARS: usize = 2_000;
/// Longest SQL fragment accepted with an instruction, in bytes.
pub const MAX_SQL_BYTES: usize = 4_000;
/// Most stored instructions one question is compared with (the database returns the nearest by
/// meaning first).
pub const MAX_CANDIDATES: usize = 200;
/// An instruction that shares no word with the question is chosen only at this similarity of
/// meaning or above, by the sentence model (the built-in embedder compares letters, not
/// meaning: unrelated sentences score about 0.5 with it).
pub const MIN_MEANING: f32 = 0.5;
/// Chosen instructions score at least this share of the best one's score.
pub const MIN_SHARE_OF_BEST: f32 = 0.5;

/// One stored instruction as the database returns it for a question, and as the trace shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instruction {
    pub id: i64,
    pub text: String,
    /// The SQL fragment it stands for, when the curator gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
    /// Cosine similarity of the question and the instruction (the sentence model's where both
    /// have a vector of it, else the built-in embedder's).
    pub meaning: f32,
    /// Whether `meaning` is the sentence model's.
    #[serde(skip)]
    pub sentence: bool,
    /// The question's words it shares, weighted by how rare they are among the candidates.
    pub words: f32,
    /// What the choice ranked by.
    pub score: f32,
}

impl Instruction {
    /// The line a prompt shows: the text, and the fragment after it.
    pub fn line(&self) -> String {
        let text = self.text.split_whitespace().collect::<Vec<_>>().join(" ");
        match self.sql.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
            Some(sql) => format!("{text} (SQL: {})", sql.split_whitespace().collect::<Vec<_>>().join(" ")),
            None => text,
        }
    }
}

/// The content words of a text, folded, plurals as their singular; stopwords and one-letter
/// words left out. Identifiers written with underscores ("sale_date") count whole and by parts.
pub fn content_words(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut add = |w: &str| {
        if w.len() < 2 || retrieve::is_stopword(w) {
            return;
        }
        out.insert(forms::singular(w).unwrap_or_else(|| w.to_string()));
    };
    for raw in text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()) {
        if raw.contains('_') {
            add(&raw.to_lowercase());
        }
        for w in embed::words(&embed::fold(raw)) {
            add(w);
        }
    }
    out
}

/// The words of a text that could name a relation, as PostgreSQL folds unquoted names
/// (lowercase): identifiers of two letters or more, with their singular and plural ("concerts"
/// names concert too, "harbour" harbours), and for a dotted one ("sales.sale_date", "shop.orders") the whole and each
/// part; each once, first seen first. Bounded by the text (instructions are short).
pub fn named(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut push = |w: &str| {
        let w = w.trim_matches('.');
        let starts = w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_');
        if !starts || w.chars().count() < 2 {
            return;
        }
        let variants: Vec<String> = if w.chars().all(char::is_alphabetic) { forms::singular(w).into_iter().chain(forms::plural(w)).collect() } else { Vec::new() };
        for form in std::iter::once(w.to_string()).chain(variants) {
            if seen.insert(form.clone()) {
                out.push(form);
            }
        }
    };
    for raw in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.')) {
        crate::interrupt::check();
        let word = raw.trim_matches('.').to_lowercase();
        if word.is_empty() {
            continue;
        }
        push(&word);
        if word.contains('.') {
            for part in word.split('.') {
                push(part);
            }
        }
    }
    out
}

/// Chooses at most `k` of `found` for `question`: each scores the share of the question's words
/// it holds, each word weighted by its rarity among the candidates (a word every instruction
/// holds tells them apart by nothing), plus, from the sentence model, its cosine similarity of
/// meaning. An instruction
/// is chosen when it shares a word with the question or the sentence model finds it close in
/// meaning (MIN_MEANING), and scores at least MIN_SHARE_OF_BEST of the best; best first, ties by id.
pub fn choose(question: &str, found: Vec<Instruction>, k: usize) -> Vec<Instruction> {
    if k == 0 || found.is_empty() {
        return Vec::new();
    }
    let asked = content_words(question);
    let held: Vec<HashSet<String>> = found
        .iter()
        .take(MAX_CANDIDATES)
        .map(|i| content_words(&format!("{} {}", i.text, i.sql.as_deref().unwrap_or(""))))
        .collect();
    let n = held.len() as f32;
    let mut df: HashMap<&str, usize> = HashMap::new();
    for words in &held {
        for w in words.iter().filter(|w| asked.contains(*w)) {
            *df.entry(w.as_str()).or_default() += 1;
        }
    }
    // A word of the question no candidate holds weighs as the rarest: it is part of what the
    // question asks, which no instruction covers.
    let idf = |w: &str| ((n + 1.0) / (df.get(w).copied().unwrap_or(0) as f32 + 0.5)).ln();
    let mass: f32 = asked.iter().map(|w| idf(w.as_str())).sum();
    let mut chosen: Vec<Instruction> = Vec::new();
    for (mut i, words) in found.into_iter().zip(&held) {
        crate::interrupt::check();
        let shared: f32 = words.iter().filter(|w| asked.contains(*w)).map(|w| idf(w.as_str())).sum();
        i.words = if mass > 0.0 { shared / mass } else { 0.0 };
        // The built-in embedder's similarity is no meaning (unrelated sentences score about 0.5
        // with it): added to every score, it would keep any instruction sharing a common word
        // within MIN_SHARE_OF_BEST of the best. It only breaks ties.
        i.score = i.words + if i.sentence { i.meaning.max(0.0) } else { 0.0 };
        if i.words > 0.0 || (i.sentence && i.meaning >= MIN_MEANING) {
            chosen.push(i);
        }
    }
    chosen.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.meaning.total_cmp(&a.meaning)).then(a.id.cmp(&b.id)));
    let best = chosen.first().map(|i| i.score).unwrap_or(0.0);
    chosen.retain(|i| i.score >= MIN_SHARE_OF_BEST * best);
    chosen.truncate(k);
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ins(id: i64, text: &str, meaning: f32) -> Instruction {
        Instruction { id, text: text.into(), sql: None, meaning, sentence: false, words: 0.0, score: 0.0 }
    }

    fn ids(v: &[Instruction]) -> Vec<i64> {
        v.iter().map(|i| i.id).collect()
    }

    fn glossary() -> Vec<Instruction> {
        vec![
            ins(1, "ADV = average daily volume of a ticker: AVG(volume) per day", 0.2),
            ins(2, "Always join transactions with tickers on ticker_id", 0.2),
            ins(3, "An active customer has status 'active' and logged in within 30 days", 0.2),
            ins(4, "Revenue excludes refunds", 0.2),
            ins(5, "Weekend days are Saturday and Sunday", 0.2),
        ]
    }

    #[test]
    fn a_defined_term_brings_its_definition() {
        let chosen = choose("What is the ADV of each ticker this month?", glossary(), 3);
        assert_eq!(chosen.first().map(|i| i.id), Some(1), "{chosen:?}");
        let chosen = choose("How many active customers are there?", glossary(), 3);
        assert_eq!(ids(&chosen), vec![3]);
    }

    #[test]
    fn a_word_every_instruction_shares_brings_none_of_them_along() {
        // The built-in embedder scores every pair about 0.5: no meaning to go by.
        let found = vec![
            ins(1, "Always join transactions with tickers on the ticker id", 0.55),
            ins(2, "Weekend transactions are those on Saturday or Sunday", 0.52),
            ins(3, "The success rate of transactions is successful transactions over all transactions", 0.5),
            ins(4, "Net amount of transactions = amount minus tax and commission", 0.56),
        ];
        let chosen = choose("For customers with at least 5 transactions, what is their success rate?", found.clone(), 5);
        assert_eq!(ids(&chosen), vec![3], "{chosen:?}");
        // With the sentence model, meaning counts.
        let sentences: Vec<Instruction> = found.into_iter().map(|mut i| {
            i.sentence = true;
            i.meaning = if i.id == 2 { 0.9 } else { 0.1 };
            i
        }).collect();
        let chosen = choose("Which transactions happened on a weekend day?", sentences, 5);
        assert_eq!(chosen.first().map(|i| i.id), Some(2), "{chosen:?}");
    }

    #[test]
    fn plurals_and_identifiers_match_their_words() {
        let w = content_words("Use sales.sale_date for the Customers' dates");
        assert!(w.contains("sale_date") && w.contains("sale") && w.contains("date") && w.contains("customer"), "{w:?}");
        assert!(!w.contains("the") && !w.contains("for"), "{w:?}");
    }

    #[test]
    fn nothing_shared_and_far_in_meaning_is_left_out() {
        assert!(choose("Which planet is the largest in the solar system?", glossary(), 5).is_empty());
        assert!(choose("How many?", glossary(), 5).is_empty());
    }

    #[test]
    fn close_meaning_without_shared_words_is_chosen() {
        let mut g = glossary();
        g[3].meaning = 0.8;
        // The built-in embedder's similarity alone chooses nothing.
        assert!(choose("What did we earn last quarter?", g.clone(), 5).is_empty());
        g[3].sentence = true;
        let chosen = choose("What did we earn last quarter?", g, 5);
        assert_eq!(ids(&chosen), vec![4]);
    }

    #[test]
    fn a_word_every_instruction_holds_does_not_choose_them_all() {
        let found = vec![
            ins(1, "ticker prices are in USD", 0.1),
            ins(2, "ticker symbols are upper case", 0.1),
            ins(3, "MoMC = month-over-month change in a ticker's average closing price", 0.1),
        ];
        let chosen = choose("Show the MoMC of every ticker", found, 5);
        assert_eq!(chosen.first().map(|i| i.id), Some(3));
        assert!(chosen.iter().all(|i| i.id == 3 || i.score < chosen[0].score), "{chosen:?}");
    }

    #[test]
    fn at_most_k_best_first_and_none_for_zero() {
        let chosen = choose("ADV and revenue and weekend days for active customers", glossary(), 2);
        assert_eq!(chosen.len(), 2);
        assert!(chosen[0].score >= chosen[1].score);
        assert!(choose("ADV", glossary(), 0).is_empty());
    }

    #[test]
    fn names_are_words_and_dotted_paths_with_their_parts() {
        assert!(
            vec!["use", "sales.sale_date", "sales", "sale", "sale_date", "not", "crtd_ts", "days", "day"]
                .into_iter()
                .all(|w| named("Use Sales.sale_date, not crtd_ts; 30 days.").contains(&w.to_string()))
        );
        assert!(named("a harbour").contains(&"harbours".to_string()));
        assert!(!named("crtd_ts").contains(&"crtd_t".to_string()));
        assert!(named("").is_empty() && named("42 1.5 a b").is_empty());
        assert_eq!(named(&"tx ".repeat(1000)), vec!["tx"]);
    }

    #[test]
    fn a_line_shows_the_fragment_after_the_text() {
        let mut i = ins(1, "Profit =\n total sales  minus costs", 0.0);
        assert_eq!(i.line(), "Profit = total sales minus costs");
        i.sql = Some(" SUM(sale_price)\n - SUM(cost) ".into());
        assert_eq!(i.line(), "Profit = total sales minus costs (SQL: SUM(sale_price) - SUM(cost))");
    }
}
