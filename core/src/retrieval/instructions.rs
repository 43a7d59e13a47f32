//! Instructions: the definitions and rules curators store once per database ("ADV is the average
//! daily volume of a ticker", "revenue excludes refunds"), chosen per question by its words and
//! by meaning, and shown to the model beside the question. They are curator-written text: shown,
//! never run or spliced into SQL.

use crate::retrieval::{forms, retrieve};
use crate::text;
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
/// Chosen instructions add at least this share of the best one's score.
pub const MIN_SHARE_OF_BEST: f32 = 0.5;
/// Most words a defined term has ("ADV", "Last week", "Active Merchants Percentage").
const MAX_TERM_WORDS: usize = 4;

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
        for w in text::words(&text::fold(raw)) {
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

/// Words that label a line rather than name a term: "Note: ..." defines nothing (nor does
/// "Definition: ADV = ...": write "ADV = ...").
const LABELS: &[&str] = &["definition", "example", "important", "note", "rule", "tip", "warning"];

/// A text's words, folded, each as its singular: what a defined term is matched on. Folded word
/// by word, so that a long question's last words count (fold reads a bounded prefix).
fn term_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text.split(|c: char| !c.is_alphanumeric()).filter(|r| !r.is_empty()) {
        for w in text::words(&text::fold(raw)) {
            out.push(forms::singular(w).unwrap_or_else(|| w.to_string()));
        }
    }
    out
}

/// Where a definition's term ends: the first `=` that is no operator (`>=`, `<=`, `!=`, `==`,
/// `:=`, `=>`) and the first `:` followed by a space or the end (not a cast `::`, a time `10:30` or a
/// URL `https://`).
fn definition_mark(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    (0..b.len()).find(|&i| match b[i] {
        b'=' => !(i > 0 && b"<>!=:".contains(&b[i - 1])) && !matches!(b.get(i + 1), Some(b'=' | b'>')),
        b':' => b.get(i + 1).is_none_or(|c| c.is_ascii_whitespace()) && !(i > 0 && b[i - 1] == b':'),
        _ => false,
    })
}

/// The names of the term an instruction defines, when its text reads as a definition ("TERM =
/// meaning" or "TERM: meaning", see definition_mark): the words before the mark, or before a
/// parenthesis there, and the words inside that parenthesis ("ADV (Average Daily Volume) for a
/// ticker = ..." is named ADV and average daily volume, "Active Merchants Percentage (APM) = ..."
/// also APM, "Last week = ..." last week). Each name has at most MAX_TERM_WORDS words, some
/// letter, and a word that is neither a stopword nor a label ("Note: ..." defines nothing). None
/// for any other text ("Always join transactions with tickers on ticker_id").
fn defined_term(text: &str) -> Vec<Vec<String>> {
    let Some(end) = definition_mark(text) else { return Vec::new() };
    let head = &text[..end];
    if head.split_whitespace().count() > 2 * MAX_TERM_WORDS {
        return Vec::new();
    }
    let (name, inside) = match head.find('(') {
        Some(open) => (&head[..open], head[open + 1..].split_once(')').map(|(inside, _)| inside)),
        None => (head, None),
    };
    let meaningful = |w: &String| w.len() >= 2 && w.chars().any(char::is_alphabetic) && !retrieve::is_stopword(w) && !LABELS.contains(&w.as_str());
    std::iter::once(name)
        .chain(inside)
        .map(term_words)
        .filter(|w| !w.is_empty() && w.len() <= MAX_TERM_WORDS && w.iter().any(meaningful))
        .collect()
}

/// Whether `words` holds `term` as a run of consecutive words.
fn names_term(words: &[String], term: &[String]) -> bool {
    !term.is_empty() && words.windows(term.len()).any(|run| run == term)
}

/// Chooses at most `k` of `found` for `question`: each scores the share of the question's words
/// it holds, each word weighted by its rarity among the candidates (a word every instruction
/// holds tells them apart by nothing), plus, from the sentence model, its cosine similarity of
/// meaning. An instruction is a candidate when it shares a word with the question or the
/// sentence model finds it close in meaning (MIN_MEANING). Best first (ties by meaning, then
/// id), each is chosen for what it adds: its score counting only the question's words no
/// instruction chosen before it holds (and that share of its meaning) must reach
/// MIN_SHARE_OF_BEST of the best one's. An instruction that shares only words
/// one chosen before it brought ("month", "transactions") is left out. The definition of a term
/// the question names word for word ("What is the SDR of each doctor?" and "SDR = a doctor's
/// rank ...") is chosen, when a candidate, whatever it adds. At most `k` in all.
pub fn choose(question: &str, found: Vec<Instruction>, k: usize) -> Vec<Instruction> {
    if k == 0 || found.is_empty() {
        return Vec::new();
    }
    let asked = content_words(question);
    let question_words = term_words(question);
    let held: Vec<HashSet<String>> = found
        .iter()
        .take(MAX_CANDIDATES)
        .map(|i| content_words(&format!("{} {}", i.text, i.sql.as_deref().unwrap_or(""))).into_iter().filter(|w| asked.contains(w)).collect())
        .collect();
    let n = held.len() as f32;
    let mut df: HashMap<&str, usize> = HashMap::new();
    for words in &held {
        for w in words {
            *df.entry(w.as_str()).or_default() += 1;
        }
    }
    // A word of the question no candidate holds weighs as the rarest: it is part of what the
    // question asks, which no instruction covers.
    let idf = |w: &str| ((n + 1.0) / (df.get(w).copied().unwrap_or(0) as f32 + 0.5)).ln();
    // Sums in a fixed order (sets iterate in a random one, and float sums then differ in their
    // last bits, which would break ties between equal scores differently from call to call).
    let sum = |weights: &mut dyn Iterator<Item = f32>| {
        let mut v: Vec<f32> = weights.collect();
        v.sort_by(f32::total_cmp);
        v.iter().sum::<f32>()
    };
    let mass: f32 = sum(&mut asked.iter().map(|w| idf(w.as_str())));
    let share = |words: &mut dyn Iterator<Item = &String>| if mass > 0.0 { sum(&mut words.map(|w| idf(w.as_str()))) / mass } else { 0.0 };
    // The built-in embedder's similarity is no meaning (unrelated sentences score about 0.5
    // with it): added to every score, it would keep any instruction sharing a common word
    // within MIN_SHARE_OF_BEST of the best. It only breaks ties.
    let meaning = |i: &Instruction| if i.sentence { i.meaning.max(0.0) } else { 0.0 };
    let mut ranked: Vec<(Instruction, &HashSet<String>, bool)> = Vec::new();
    for (mut i, words) in found.into_iter().zip(&held) {
        crate::interrupt::check();
        i.words = share(&mut words.iter());
        i.score = i.words + meaning(&i);
        let named = defined_term(&i.text).iter().any(|term| names_term(&question_words, term));
        if i.words > 0.0 || (i.sentence && i.meaning >= MIN_MEANING) {
            ranked.push((i, words, named));
        }
    }
    ranked.sort_by(|(a, ..), (b, ..)| b.score.total_cmp(&a.score).then(b.meaning.total_cmp(&a.meaning)).then(a.id.cmp(&b.id)));
    let best = ranked.first().map(|(i, ..)| i.score).unwrap_or(0.0);
    let mut brought: HashSet<&String> = HashSet::new();
    let mut chosen: Vec<Instruction> = Vec::new();
    for (i, words, named) in ranked {
        crate::interrupt::check();
        // What it adds: the words no instruction before it brought, and as much of its meaning
        // as of its words is new.
        let new_words = share(&mut words.iter().filter(|w| !brought.contains(w)));
        let added = new_words + meaning(&i) * if i.words > 0.0 { new_words / i.words } else { 1.0 };
        if named || added >= MIN_SHARE_OF_BEST * best {
            brought.extend(words.iter());
            chosen.push(i);
            if chosen.len() == k {
                break;
            }
        }
    }
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
    fn an_instruction_sharing_only_words_one_chosen_already_brought_is_left_out() {
        let found = vec![
            ins(1, "STR (success transaction rate) = successful wallet transactions / all transactions", 0.1),
            ins(2, "PMDAU = distinct senders of wallet transactions per month", 0.1),
            ins(3, "TUC = user sessions in the past month", 0.1),
            ins(4, "Merchants are stores that receive wallet transactions", 0.1),
        ];
        // Scored alone, 2 ("wallet", "transactions", "month") is within half of 1's score.
        let chosen = choose("What was the STR of wallet transactions in the previous month?", found, 5);
        assert_eq!(ids(&chosen), vec![1], "{chosen:?}");
    }

    #[test]
    fn definitions_of_two_terms_the_question_names_are_both_chosen() {
        let found = vec![
            ins(1, "ADV (average daily volume) of a ticker = AVG(volume) from the daily prices", 0.1),
            ins(2, "ATH (all time high) of a ticker = MAX(high) from the daily prices", 0.1),
            ins(3, "Weekend days are Saturday and Sunday", 0.1),
            // Shares every word of the question: first, and what 1 and 2 add is under half its score.
            ins(4, "ADV and ATH are computed per ticker from the daily prices", 0.1),
        ];
        let mut chosen = ids(&choose("Show the ADV and the ATH of each ticker", found.clone(), 5));
        chosen.sort();
        assert_eq!(chosen, vec![1, 2, 4]);
        // At most k, defined terms included, best first.
        assert_eq!(ids(&choose("Show the ADV and the ATH of each ticker", found, 2)).len(), 2);
    }

    #[test]
    fn with_the_sentence_model_only_new_words_bring_their_share_of_meaning() {
        let mut found = vec![
            ins(1, "Revenue counts sold orders net of refunds", 0.6),
            ins(2, "Revenue of sold orders is what counts", 0.6),
        ];
        for i in &mut found {
            i.sentence = true;
        }
        // 2 shares only words 1 brought: however close in meaning, it adds nothing (its whole
        // meaning, 0.6, would be over half of 1's score, about 0.95, with "last quarter"
        // weighing on the question but held by neither).
        assert_eq!(ids(&choose("What was the revenue of sold orders net of refunds last quarter?", found, 5)), vec![1]);
    }

    #[test]
    fn the_definition_of_a_term_the_question_names_is_chosen_whatever_it_adds() {
        let found = vec![
            ins(1, "To find doctors who prescribed a drug type, join doctors with treatments on doc_id and count distinct drugs", 0.1),
            ins(2, "SDR = a doctor's rank within their specialty by number of distinct drugs prescribed", 0.1),
            ins(3, "Doctors can be joined to treatments on doc_id", 0.1),
        ];
        let q = "Return each doctor's doc_id, number of distinct drugs prescribed, and SDR";
        let chosen = ids(&choose(q, found.clone(), 5));
        assert!(chosen.contains(&2), "{chosen:?}");
        // A text that does not read as a definition is held to what it adds.
        assert!(!chosen.contains(&3), "{chosen:?}");
        // Nor is a definition chosen for a question that does not name its term.
        let chosen = ids(&choose("Return each doctor's doc_id and number of distinct drugs prescribed", found, 5));
        assert!(!chosen.contains(&2), "{chosen:?}");
    }

    #[test]
    fn a_defined_term_is_the_short_text_before_its_definition() {
        let term = |t: &str| defined_term(t).into_iter().map(|w| w.join(" ")).collect::<Vec<_>>();
        assert_eq!(term("ADV (Average Daily Volume) for a ticker = AVG(volume)"), vec!["adv", "average daily volume"]);
        assert_eq!(term("Active Merchants Percentage (APM) = COUNT(DISTINCT mid)"), vec!["active merchant percentage", "apm"]);
        assert_eq!(term("Last 6 months = DATE_TRUNC('month', CURRENT_DATE) - INTERVAL '6 months'"), vec!["last 6 month"]);
        assert_eq!(term("GPM: gross profit margin"), vec!["gpm"]);
        assert_eq!(term("ADV (average daily volume = AVG(volume)"), vec!["adv"]);
        for not_one in [
            "Always join transactions with tickers on ticker_id",
            "Weekend days are Saturday (6) and Sunday (0).",
            "Price >= 100 is premium, price <= 10 cheap, price != 0 sold",
            "amount::numeric is needed for ratios",
            "amount:: numeric casts it",
            "a == b is equality",
            "x := 1 assigns",
            "f(a => 1) names an argument",
            "Opens 10:30 daily, see https://example.com",
            "Note: prices are in USD",
            "The total = everything",
            "If events from two different tables of the same interval are joined, join on DATE_TRUNC('month', a.d)=DATE_TRUNC('month', b.d)",
            "= 1",
            "(6) = six",
        ] {
            assert!(term(not_one).is_empty(), "{not_one}");
        }
        // Named word for word, plurals as singulars; not by a longer or another run.
        let q = |t: &str| term_words(t);
        assert!(names_term(&q("What was the ADV of each ticker?"), &q("ADV")));
        assert!(names_term(&q("Sales in the last 6 months"), &q("Last 6 months")));
        assert!(!names_term(&q("Sales in each of the last 8 weeks"), &q("Last week")));
        assert!(!names_term(&q("What is the average number of days between sale and payment?"), &q("Total Sales")));
        // However long the question.
        assert!(names_term(&q(&format!("{} What was the ADV?", "Some context. ".repeat(40))), &q("ADV")));
    }

    #[test]
    fn equal_scores_rank_the_same_at_every_call() {
        // Three instructions sharing the same words of the question score the same; the order
        // (by meaning, then id) must not depend on how a set happened to iterate.
        let found = vec![
            ins(3, "CR = customer rank by total transaction amount", 0.2),
            ins(1, "To get the total transaction amount per customer, group by customer", 0.2),
            ins(2, "PMAT = per month average transaction amount of a customer", 0.2),
        ];
        let first = choose("Who are the top 5 customers by total transaction amount?", found.clone(), 5);
        for _ in 0..50 {
            assert_eq!(choose("Who are the top 5 customers by total transaction amount?", found.clone(), 5), first);
        }
        assert_eq!(first.first().map(|i| i.id), Some(1), "{first:?}");
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
