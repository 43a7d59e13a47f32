//! Value and column retrieval, the parts that need no database: splitting a query into the
//! phrases that are looked up (split retrieval on the query side), the final score of a
//! candidate, merging candidates into the best few, and the prompt section they become.

use crate::retrieval::embed::{feature_cosine, features};
use crate::text::{self, edit_similarity};
use serde::Serialize;

/// A text looked up in the index: a phrase of the query, or another form of one.
#[derive(Debug, Clone, PartialEq)]
pub struct Lookup {
    pub text: String,
    /// The query phrase it stands for (what a hit reports as matched).
    pub query: String,
    /// 1 for the phrase itself; `lookup::FORM_MATCH` for another form of it.
    pub weight: f32,
    /// Whether the store searches its nearest entries (HNSW) for this text besides the exact and
    /// byte-order neighbour reads: see `lookup::candidates`.
    pub nearest: bool,
}

impl Lookup {
    pub fn plain(text: &str) -> Lookup {
        Lookup { text: text.to_string(), query: text.to_string(), weight: 1.0, nearest: true }
    }
}

/// Words that never name a value on their own.
const STOPWORDS: &[&str] = &[
    "a", "about", "above", "after", "all", "also", "among", "an", "and", "any", "are", "as", "at", "average", "be",
    "been", "before", "below", "between", "both", "but", "by", "can", "count", "did", "different", "distinct", "do",
    "does", "each", "either", "every", "find", "for", "from", "give", "had", "has", "have", "how", "i", "in", "into",
    "is", "it", "its", "least", "less", "list", "many", "max", "maximum", "me", "min", "minimum", "more", "most",
    "much", "my", "name", "names", "not", "number", "of", "on", "one", "only", "or", "order", "our", "per", "return",
    "show", "so", "sorted", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "those",
    "to", "total", "two", "under", "up", "was", "we", "were", "what", "when", "where", "which", "while", "who",
    "whom", "whose", "why", "with", "without", "you", "your",
];

/// Most phrases looked up for one query.
pub const MAX_PHRASES: usize = 24;
/// A match through one of a value's phrases counts a little less than a match of the whole
/// value: "town" matching "Town 7" must not tie with "town 7" matching it.
pub const PHRASE_MATCH: f32 = 0.95;

pub(crate) fn is_stopword(w: &str) -> bool {
    STOPWORDS.binary_search(&w).is_ok()
}

/// The phrases of a query to look up: quoted strings first, then every run of one to three
/// words that are not stopwords, except runs of numbers alone ("Terminal 5" and "Route 66"
/// are phrases, "1970" is not). A query of one or two words is also looked up whole.
pub fn query_phrases(query: &str) -> Vec<String> {
    query_phrases_skipping(query, &[])
}

/// The words that name tables and columns, folded, with their plural and singular forms, sorted.
/// A question's "stadiums" names the table, not a value: looking it up finds
/// 'Bayview Stadium', which a small model then turns into a filter nobody asked for.
pub fn schema_words<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    // Names repeat their words ("singer_id" in every table): fold and keep each word once,
    // then add its forms.
    let mut words: std::collections::HashSet<String> = std::collections::HashSet::new();
    for name in names {
        let folded = text::fold(name);
        for w in text::words(&folded).filter(|w| w.len() > 1 && !w.chars().all(|c| c.is_ascii_digit())) {
            if !words.contains(w) {
                words.insert(w.to_string());
            }
        }
    }
    let mut out: Vec<String> = Vec::with_capacity(words.len() * 3);
    for w in words {
        out.push(format!("{w}s"));
        if let Some(stem) = w.strip_suffix('y') {
            out.push(format!("{stem}ies"));
        }
        if w.ends_with(['s', 'x', 'h']) {
            out.push(format!("{w}es"));
        }
        if let Some(stem) = w.strip_suffix('s').filter(|s| s.len() > 1) {
            out.push(stem.to_string());
        }
        out.push(w);
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Like [`query_phrases`], leaving out the phrases made only of `skip` words (sorted, as
/// [`schema_words`] returns them): "Bayview stadium" is still looked up, "stadiums" is not.
/// Quoted strings are always kept.
pub fn query_phrases_skipping(query: &str, skip: &[String]) -> Vec<String> {
    let skipped = |w: &str| skip.binary_search_by(|s| s.as_str().cmp(w)).is_ok();
    let mut out: Vec<String> = Vec::new();
    let push = |p: String, out: &mut Vec<String>| {
        if !p.is_empty() && !out.contains(&p) && out.len() < MAX_PHRASES {
            out.push(p);
        }
    };
    // Quoted strings are the user naming a value: keep them whole.
    for quote in ['\'', '"', '“', '‘'] {
        let close = match quote {
            '“' => '”',
            '‘' => '’',
            q => q,
        };
        let mut rest = query;
        while let Some(start) = rest.find(quote) {
            let after = &rest[start + quote.len_utf8()..];
            let Some(end) = after.find(close) else { break };
            push(text::fold(&after[..end]), &mut out);
            rest = &after[end + close.len_utf8()..];
        }
    }
    // Codes ("AN-1557", "B52"): letters and digits in one token are looked up whole, whatever
    // their letters spell ("an" alone is a stopword).
    for token in query.split_whitespace() {
        let token = token.trim_matches(|c: char| !c.is_alphanumeric());
        if token.chars().any(|c| c.is_ascii_digit()) && token.chars().any(char::is_alphabetic) {
            push(text::fold(token), &mut out);
        }
    }
    let folded = text::fold(query);
    let all: Vec<&str> = text::words(&folded).collect();
    if all.len() <= 2 && !all.iter().all(|w| skipped(w)) {
        push(folded.clone(), &mut out);
    }
    // Runs of words that are not stopwords.
    let mut runs: Vec<Vec<&str>> = vec![vec![]];
    for w in &all {
        if is_stopword(w) {
            runs.push(vec![]);
        } else if let Some(run) = runs.last_mut() {
            run.push(w);
        }
    }
    let number = |w: &&str| w.chars().all(|c| c.is_ascii_digit());
    for len in 1..=3 {
        for run in runs.iter().filter(|r| r.len() >= len) {
            for win in run.windows(len).filter(|win| !win.iter().all(number) && !win.iter().all(|w| skipped(w))) {
                push(win.join(" "), &mut out);
            }
        }
    }
    out
}

/// A candidate from the index: which column, the stored value, the text that was matched
/// (the value or one of its phrases), and the endpoint embedding's cosine when there is one.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub column: u32,
    pub value: String,
    pub term: String,
    /// Cosine with the query phrase of the endpoint's vectors; None for the built-in embedder,
    /// whose exact cosine is computed here.
    pub cosine: Option<f32>,
    /// pg_trgm's similarity() of the query phrase and the term, when the database computed it.
    pub trigram: Option<f32>,
    /// Which query phrase found it.
    pub phrase: usize,
}

/// A retrieved value and its score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    pub column: u32,
    pub value: String,
    pub score: f32,
    /// The query phrase it matched.
    pub matched: String,
}

/// Scores candidates — the best of embedding cosine, edit similarity and trigram similarity,
/// a little less through a phrase of the value or another form of the query's phrase — keeps
/// each value's best score, drops those under `threshold`, and returns the best `k`, best first
/// (ties: shorter value, then alphabetical). [`Candidate::phrase`] indexes `lookups`.
pub fn rank(lookups: &[Lookup], candidates: &[Candidate], threshold: f32, k: usize) -> Vec<Hit> {
    rank_in(&[], lookups, candidates, threshold, k)
}

/// A value all of whose words the question names, in any order or with a typo, scores this
/// much: a little less than the value written as stored.
pub const COVERAGE_MATCH: f32 = 0.97;
/// Least spelling similarity for a word of the question to count as a word of a value.
const WORD_MATCH: f32 = 0.75;

/// The question's words that may name a value: folded, without stopwords and `skip` words
/// (sorted, as [`schema_words`] returns them).
pub fn query_words(query: &str, skip: &[String]) -> Vec<String> {
    let folded = text::fold(query);
    let mut out: Vec<String> = Vec::new();
    for w in text::words(&folded) {
        if !is_stopword(w) && skip.binary_search_by(|s| s.as_str().cmp(w)).is_err() && !out.iter().any(|o| o == w) {
            out.push(w.to_string());
        }
    }
    out
}

/// How much of a value the question's words name: each word of the value (stopwords aside)
/// scores its best spelling similarity to a word of the question (nothing under 0.75), and the
/// scores are averaged. "Distant Orchard of the River" is covered 0.95 by "river orchard
/// distnat"; "The Last Golden" 0.5 by "harbour last valley".
pub fn coverage(value: &str, words: &[String]) -> f32 {
    let folded = text::fold(value);
    let mut n = 0usize;
    let mut sum = 0f32;
    for vw in text::words(&folded).filter(|w| !is_stopword(w)) {
        n += 1;
        sum += words
            .iter()
            .map(|qw| if qw == vw { 1.0 } else { edit_similarity(qw, vw) })
            .filter(|s| *s >= WORD_MATCH)
            .fold(0f32, f32::max);
    }
    if n == 0 {
        0.0
    } else {
        sum / n as f32
    }
}

/// [`rank`] knowing the question's words ([`query_words`]): a match through one phrase of a
/// value counts for more the more of the value's words the question names, and a value whose
/// words the question names all (in any order) scores [`COVERAGE_MATCH`] times that coverage.
pub fn rank_in(words: &[String], lookups: &[Lookup], candidates: &[Candidate], threshold: f32, k: usize) -> Vec<Hit> {
    let lookup_features: Vec<Vec<(u64, f32)>> = lookups.iter().map(|l| features(&l.text)).collect();
    let mut covered: std::collections::HashMap<&str, f32> = std::collections::HashMap::new();
    let mut best: std::collections::HashMap<(u32, &str), Hit> = std::collections::HashMap::new();
    for (n, c) in candidates.iter().enumerate() {
        crate::interrupt::every(n, 1024);
        let Some(lookup) = lookups.get(c.phrase) else { continue };
        let phrase = &lookup.text;
        let cosine = c.cosine.unwrap_or_else(|| feature_cosine(&lookup_features[c.phrase], &features(&c.term)));
        let mut score = cosine.max(edit_similarity(phrase, &c.term)).max(c.trigram.unwrap_or(0.0)).min(1.0);
        // 1.0 means identical up to case and accents: trigram sets can tie "1999" with "19999".
        if score >= 1.0 && text::fold(&c.term) != *phrase {
            score = 0.99;
        }
        let cov = if words.is_empty() { None } else { Some(*covered.entry(c.value.as_str()).or_insert_with(|| coverage(&c.value, words))) };
        if c.term != c.value {
            score *= match cov {
                Some(cov) => PHRASE_MATCH * (0.85 + 0.15 * cov),
                None => PHRASE_MATCH,
            };
        }
        score *= lookup.weight;
        if let Some(cov) = cov {
            score = score.max(COVERAGE_MATCH * cov);
        }
        if score < threshold {
            continue;
        }
        let entry = best.entry((c.column, c.value.as_str())).or_insert_with(|| Hit {
            column: c.column,
            value: c.value.clone(),
            score,
            matched: lookup.query.clone(),
        });
        if score > entry.score {
            entry.score = score;
            entry.matched = lookup.query.clone();
        }
    }
    let mut hits: Vec<Hit> = best.into_values().collect();
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.value.len().cmp(&b.value.len()))
            .then(a.value.cmp(&b.value))
            .then(a.column.cmp(&b.column))
    });
    hits.truncate(k);
    hits
}

/// A value shown to the model, with the column it lives in as written in SQL.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValueHint {
    /// As the catalog's names are matched (raw); the trace shows it escaped.
    #[serde(serialize_with = "crate::render::serialize_visible")]
    pub column: String,
    /// As stored; the trace shows it escaped (the prompt, as a literal: [`render_values`]).
    #[serde(serialize_with = "crate::render::serialize_visible")]
    pub value: String,
    pub score: f32,
}

/// The prompt section of similar values (OpenSearch-SQL's "similar values"); empty when none.
pub fn render_values(hints: &[ValueHint]) -> String {
    if hints.is_empty() {
        return String::new();
    }
    let mut out = String::from("### Stored values similar to words of the question (column: value):\n");
    for h in hints {
        out.push_str(&format!("# {}: {}\n", crate::render::ident(&h.column), crate::render::literal(&h.value)));
    }
    out
}

/// Reciprocal rank fusion (Cormack et al., 2009; k = 60) of two rankings of the same items,
/// given each item's two scores (higher is better; None: not in that ranking, as a match too
/// weak to rank): the items' indices, best first. Ties go to the first ranking.
pub fn fuse_ranks(scores: &[(Option<f32>, Option<f32>)]) -> Vec<usize> {
    const K: f32 = 60.0;
    let n = scores.len();
    let contribution = |key: &dyn Fn(usize) -> Option<f32>| {
        let mut ranked: Vec<(usize, f32)> = (0..n).filter_map(|i| key(i).map(|s| (i, s))).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut out = vec![(0.0f32, usize::MAX); n];
        for (r, &(i, _)) in ranked.iter().enumerate() {
            out[i] = (1.0 / (K + r as f32), r);
        }
        out
    };
    let first = contribution(&|i| scores[i].0);
    let second = contribution(&|i| scores[i].1);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| (first[b].0 + second[b].0).total_cmp(&(first[a].0 + second[a].0)).then(first[a].1.cmp(&first[b].1)).then(a.cmp(&b)));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_fusion_rewards_both_rankings() {
        // 0: first by name, third by meaning; 1: second by both; 2: the reverse of 0 (a tie
        // with 0, which the first ranking breaks); 3: last by both.
        let s = |a: f32, b: f32| (Some(a), Some(b));
        let scores = [s(1.0, 0.1), s(0.8, 0.5), s(0.2, 0.6), s(0.1, 0.0)];
        assert_eq!(fuse_ranks(&scores), vec![0, 2, 1, 3]);
        assert_eq!(fuse_ranks(&[]), Vec::<usize>::new());
        // Not a match by name at all: ranked by meaning alone, before what neither ranks.
        let scores = [(Some(0.9), None), (None, Some(0.2)), (None, Some(0.7)), (None, None)];
        assert_eq!(fuse_ranks(&scores), vec![0, 2, 1, 3]);
        // Both rankings beat either.
        let scores = [(Some(0.9), None), (Some(0.7), Some(0.3)), (None, Some(0.8))];
        assert_eq!(fuse_ranks(&scores)[0], 1);
    }

    #[test]
    fn stopwords_are_sorted() {
        let mut s = STOPWORDS.to_vec();
        s.sort();
        assert_eq!(s, STOPWORDS);
    }

    #[test]
    fn phrases_of_a_question() {
        let p = query_phrases("How many singers are from France?");
        assert_eq!(p, vec!["singers", "france"]);
        let p = query_phrases("Which cars were made by Ford Motor Company in 1970?");
        assert!(p.contains(&"ford motor company".to_string()));
        assert!(p.contains(&"ford".to_string()) && p.contains(&"motor company".to_string()));
        assert!(!p.iter().any(|x| x.contains("1970")));
        assert_eq!(query_phrases("Abredeen"), vec!["abredeen"]);
        assert_eq!(query_phrases("aberdeen airport")[0], "aberdeen airport");
        let p = query_phrases("Which flights leave from Terminal 5 in 2024?");
        assert!(p.contains(&"terminal 5".to_string()) && !p.contains(&"5".to_string()) && !p.iter().any(|x| x.contains("2024")));
        assert_eq!(query_phrases("village 3-24"), vec!["village", "village 3", "village 3 24"]);
        assert_eq!(query_phrases("What do we know about an-1557?"), vec!["an 1557", "know"]);
        assert!(query_phrases("Which B52 flights?").contains(&"b52".to_string()));
    }

    #[test]
    fn schema_words_leave_out_names_of_tables_and_columns() {
        let skip = schema_words(["stadium", "singer_in_concert", "Country", "city"]);
        assert!(skip.windows(2).all(|w| w[0] < w[1]));
        for w in ["stadium", "stadiums", "singer", "singers", "concert", "country", "countries", "city", "cities"] {
            assert!(skip.contains(&w.to_string()), "{w}");
        }
        let p = query_phrases_skipping("How many stadiums are in Bayview stadium?", &skip);
        assert!(!p.contains(&"stadiums".to_string()) && !p.contains(&"stadium".to_string()), "{p:?}");
        assert!(p.contains(&"bayview stadium".to_string()) && p.contains(&"bayview".to_string()), "{p:?}");
        let p = query_phrases_skipping("Count the singers from each country", &skip);
        assert!(p.is_empty(), "{p:?}");
        // Quoted strings are the user naming a value, whatever the words.
        let p = query_phrases_skipping("Which singers are from 'Country'?", &skip);
        assert_eq!(p, vec!["country"]);
        assert_eq!(query_phrases_skipping("stadiums", &skip), Vec::<String>::new());
    }

    #[test]
    fn quoted_strings_stay_whole() {
        let p = query_phrases("Who sang 'Love Me Do' in \"The Cavern\"?");
        assert_eq!(&p[..2], &["love me do".to_string(), "the cavern".to_string()]);
    }

    fn plain(phrases: &[&str]) -> Vec<Lookup> {
        phrases.iter().map(|p| Lookup::plain(p)).collect()
    }

    fn cand(column: u32, value: &str, term: &str, phrase: usize) -> Candidate {
        Candidate { column, value: value.into(), term: term.into(), cosine: None, trigram: None, phrase }
    }

    #[test]
    fn ranks_typos_and_phrases_above_threshold() {
        let phrases = plain(&["abredeen"]);
        let cands = vec![
            cand(1, "ABERDEEN", "ABERDEEN", 0),
            cand(1, "Aberdeen Airport", "aberdeen", 0),
            cand(1, "Glasgow", "Glasgow", 0),
        ];
        let hits = rank(&phrases, &cands, 0.65, 10);
        let values: Vec<&str> = hits.iter().map(|h| h.value.as_str()).collect();
        assert_eq!(values, vec!["ABERDEEN", "Aberdeen Airport"]);
        assert!(hits[0].score >= 0.85);
        assert!(hits[1].score < hits[0].score);
    }

    #[test]
    fn whole_value_matches_beat_phrase_matches() {
        let phrases = plain(&["town 7", "town"]);
        let cands = vec![cand(1, "Town 1", "town", 1), cand(1, "Town 7", "Town 7", 0), cand(1, "Town 7", "town", 1)];
        let hits = rank(&phrases, &cands, 0.65, 1);
        assert_eq!(hits[0].value, "Town 7");
        assert_eq!(hits[0].score, 1.0);
    }

    #[test]
    fn keeps_the_best_phrase_per_value_and_top_k() {
        let phrases = plain(&["france", "singers"]);
        let cands = vec![cand(7, "France", "France", 1), cand(7, "France", "France", 0), cand(7, "Francia", "Francia", 0)];
        let hits = rank(&phrases, &cands, 0.65, 1);
        assert_eq!(hits.len(), 1);
        assert_eq!((hits[0].value.as_str(), hits[0].matched.as_str()), ("France", "france"));
    }

    #[test]
    fn trigram_similarity_counts() {
        let phrases = plain(&["charles de gaulle"]);
        let mut c = cand(1, "Charles de Gaulle Airport (Paris)", "Charles de Gaulle Airport (Paris)", 0);
        c.trigram = Some(0.98);
        assert_eq!(rank(&phrases, &[c], 0.65, 5)[0].score, 0.98);
    }

    #[test]
    fn only_identical_texts_score_one() {
        let phrases = plain(&["town 19999"]);
        let mut near = cand(1, "Town 1999", "Town 1999", 0);
        near.trigram = Some(1.0);
        let exact = cand(1, "Town 19999", "Town 19999", 0);
        let hits = rank(&phrases, &[near, exact], 0.65, 2);
        assert_eq!((hits[0].value.as_str(), hits[0].score), ("Town 19999", 1.0));
        assert_eq!(hits[1].score, 0.99);
    }

    #[test]
    fn endpoint_cosine_is_used_when_given() {
        let phrases = plain(&["nyc"]);
        let mut c = cand(1, "New York", "New York", 0);
        c.cosine = Some(0.9);
        assert_eq!(rank(&phrases, &[c], 0.65, 5)[0].score, 0.9);
    }

    #[test]
    fn values_the_question_names_word_by_word() {
        let words = query_words("Which entries are linked to Harbour Last of the Vlley?", &[]);
        assert_eq!(words, vec!["entries", "linked", "harbour", "last", "vlley"]);
        assert!((coverage("Harbour Last of the Valley", &words) - (2.0 + 5.0 / 6.0) / 3.0).abs() < 1e-5);
        assert_eq!(coverage("The Last Golden", &words), 0.5);
        assert_eq!(coverage("of the", &words), 0.0);
        // A phrase match of a value the question names only in part counts less.
        let lookups = plain(&["last", "harbour last", "vlley"]);
        let cands = vec![cand(1, "The Last Golden", "last", 0), cand(1, "Harbour Last of the Valley", "harbour last", 1)];
        let hits = rank_in(&words, &lookups, &cands, 0.65, 2);
        assert_eq!(hits[0].value, "Harbour Last of the Valley");
        assert!(hits[1].score < 0.9 && hits[1].score < hits[0].score, "{:?}", hits);
        // Word order does not matter.
        let words = query_words("river orchard distant", &[]);
        let hits = rank_in(&words, &plain(&["river"]), &[cand(1, "Distant Orchard of the River", "river", 0)], 0.65, 1);
        assert_eq!(hits[0].score, COVERAGE_MATCH);
        // Schema words do not count.
        let skip = schema_words(["stadium"]);
        assert_eq!(query_words("Which stadiums are in Bayview?", &skip), vec!["bayview"]);
    }

    #[test]
    fn prompt_section() {
        assert_eq!(render_values(&[]), "");
        let s = render_values(&[ValueHint { column: "singer.country".into(), value: "Côte d'Ivoire".into(), score: 0.9 }]);
        assert_eq!(s, "### Stored values similar to words of the question (column: value):\n# singer.country: 'Côte d''Ivoire'\n");
    }
}
