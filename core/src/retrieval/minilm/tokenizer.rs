//! BERT's uncased WordPiece tokenizer, as `BertTokenizer` with `do_lower_case`,
//! `tokenize_chinese_chars` and accents stripped: basic tokenisation (control characters
//! dropped, whitespace split, CJK ideographs and punctuation split off, NFD with the
//! nonspacing marks removed, lowercase), then greedy longest-match-first WordPiece with `##`
//! continuations. Where Python's slow `BertTokenizer` and the fast one of `tokenizer.json`
//! differ (the final sigma), this follows the fast one, which sentence-transformers uses.
//!
//! Text is text: a literal "[SEP]" in the input is tokenised as `[`, `sep`, `]`, never as the
//! special token.

use std::collections::HashMap;
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};

/// A word longer than this many characters is one `[UNK]` (BERT's `max_input_chars_per_word`).
const MAX_WORD_CHARS: usize = 100;

/// The vocabulary and the ids of the special tokens.
#[derive(Debug)]
pub struct Tokenizer {
    vocab: HashMap<String, u32>,
    cls: u32,
    sep: u32,
    unk: u32,
}

impl Tokenizer {
    /// A vocabulary in `vocab.txt` form: one token a line, its id its line number from 0.
    /// A token that occurs twice keeps its last line, as BERT's loader does.
    pub fn from_vocab(text: &str) -> Result<Tokenizer, String> {
        let mut vocab = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let id = u32::try_from(i).map_err(|_| "vocabulary too large".to_string())?;
            vocab.insert(line.to_string(), id);
        }
        let special = |name: &str| {
            vocab
                .get(name)
                .copied()
                .ok_or_else(|| format!("vocabulary has no {name} token"))
        };
        let (cls, sep, unk) = (special("[CLS]")?, special("[SEP]")?, special("[UNK]")?);
        Ok(Tokenizer {
            vocab,
            cls,
            sep,
            unk,
        })
    }

    /// The highest id in the vocabulary (its line count less one).
    pub fn max_id(&self) -> u32 {
        self.vocab.values().copied().max().unwrap_or(0)
    }

    /// `[CLS]`, the WordPiece ids of `text`, `[SEP]`: at most `max_tokens` ids in all (at
    /// least 2), the text's pieces cut at the end when there are more.
    pub fn encode(&self, text: &str, max_tokens: usize) -> Vec<u32> {
        let room = max_tokens.max(2) - 2;
        let mut ids = vec![self.cls];
        // Words are read only until the ids are full: the cost is bounded by max_tokens, not
        // by the text's length.
        each_basic_token(text, |word| {
            self.wordpiece(word, &mut ids);
            ids.len() <= room
        });
        ids.truncate(room + 1);
        ids.push(self.sep);
        ids
    }

    /// Greedy longest-match-first pieces of one word, or one `[UNK]` when a part of it matches
    /// nothing or it is too long.
    fn wordpiece(&self, word: &str, out: &mut Vec<u32>) {
        if word.chars().nth(MAX_WORD_CHARS).is_some() {
            out.push(self.unk);
            return;
        }
        let bounds: Vec<usize> = word
            .char_indices()
            .map(|(i, _)| i)
            .chain(std::iter::once(word.len()))
            .collect();
        let chars = bounds.len() - 1;
        if chars > MAX_WORD_CHARS {
            out.push(self.unk);
            return;
        }
        let first = out.len();
        let mut key = String::with_capacity(word.len() + 2);
        let mut start = 0;
        while start < chars {
            let mut found = None;
            let mut end = chars;
            while end > start {
                key.clear();
                if start > 0 {
                    key.push_str("##");
                }
                key.push_str(&word[bounds[start]..bounds[end]]);
                if let Some(&id) = self.vocab.get(key.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= 1;
            }
            match found {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => {
                    out.truncate(first);
                    out.push(self.unk);
                    return;
                }
            }
        }
    }
}

/// BERT's basic tokenisation: the words and punctuation marks that WordPiece then splits.
pub fn basic_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_basic_token(text, |w| {
        out.push(w.to_string());
        true
    });
    out
}

/// Calls `f` with each of `text`'s basic tokens in order, until `f` returns false. One pass,
/// holding one word at a time.
fn each_basic_token(text: &str, mut f: impl FnMut(&str) -> bool) {
    // Clean: drop NUL, U+FFFD and control characters; any whitespace (Unicode's White_Space,
    // which holds BERT's Zs, tab, newline and carriage return) ends a word; a CJK ideograph
    // is a word of its own.
    let mut word = String::new();
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || is_control(c) {
            continue;
        }
        if is_cjk(c) || c.is_whitespace() {
            if !split_word(&word, &mut f) {
                return;
            }
            word.clear();
            if is_cjk(c) && !f(c.encode_utf8(&mut [0; 4])) {
                return;
            }
        } else {
            word.push(c);
        }
    }
    split_word(&word, &mut f);
}

/// Passes the pieces of one whitespace-free `word` to `f`; false when `f` asked to stop.
fn split_word(word: &str, f: &mut impl FnMut(&str) -> bool) -> bool {
    if word.is_empty() {
        return true;
    }
    // Strip accents (decompose, drop the nonspacing marks), then lowercase character by
    // character: the order and the per-character lowercase (no final sigma) of the fast
    // tokenizer (tokenizer.json) that sentence-transformers runs.
    let mut piece = String::with_capacity(word.len());
    let chars = word
        .nfd()
        .filter(|c| c.general_category() != GeneralCategory::NonspacingMark)
        .flat_map(char::to_lowercase);
    for c in chars {
        if is_punctuation(c) || c.is_whitespace() {
            if !piece.is_empty() && !f(&piece) {
                return false;
            }
            piece.clear();
            if is_punctuation(c) && !f(c.encode_utf8(&mut [0; 4])) {
                return false;
            }
        } else {
            piece.push(c);
        }
    }
    piece.is_empty() || f(&piece)
}

/// BERT's control characters: every "other" category (Cc, Cf, Co, Cn, Cs) but tab, newline
/// and carriage return, which are whitespace.
fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.general_category_group() == GeneralCategoryGroup::Other
}

/// BERT's punctuation: every non-alphanumeric printable ASCII character ('$', '+', '^', '`'
/// included, though Unicode calls them symbols) and the Unicode punctuation categories (P*).
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || c.general_category_group() == GeneralCategoryGroup::Punctuation
}

/// The CJK Unified Ideographs blocks (and their extensions and compatibility forms) that BERT
/// splits into one token each. Hiragana, Katakana and Hangul are not among them.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2A6DF
        | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F
        | 0x2B820..=0x2CEAF
        | 0xF900..=0xFAFF
        | 0x2F800..=0x2FA1F)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VOCAB: &str = "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n,\nworld\n!\ncafe\nun\n##aff\n##able\n\
                         ##a\nrun\n##ning\n中\n国\n.\na\nb\n$\n'\ns\nnaive\n";

    fn tok() -> Tokenizer {
        Tokenizer::from_vocab(VOCAB).unwrap()
    }

    fn id(s: &str) -> u32 {
        tok().vocab[s]
    }

    #[test]
    fn hello_world() {
        let t = tok();
        assert_eq!(
            basic_tokens("Hello, World!"),
            vec!["hello", ",", "world", "!"]
        );
        assert_eq!(
            t.encode("Hello, World!", 128),
            vec![2, id("hello"), id(","), id("world"), id("!"), 3]
        );
    }

    #[test]
    fn reading_stops_when_the_ids_are_full() {
        let mut seen = 0;
        each_basic_token(&"a, b ".repeat(1000), |_| {
            seen += 1;
            seen < 3
        });
        assert_eq!(seen, 3);
        // A long text costs what its first words cost; a long word is one [UNK].
        let t = tok();
        let ids = t.encode(&"a ".repeat(5_000_000), 8);
        assert_eq!(ids, vec![2, id("a"), id("a"), id("a"), id("a"), id("a"), id("a"), 3]);
        assert_eq!(t.encode(&"b".repeat(1_000_000), 8), vec![2, 1, 3]);
    }

    #[test]
    fn accents_and_case() {
        assert_eq!(basic_tokens("Café"), vec!["cafe"]);
        assert_eq!(basic_tokens("CAFE\u{301}"), vec!["cafe"]);
        assert_eq!(basic_tokens("Naïve résumé"), vec!["naive", "resume"]);
        assert_eq!(tok().encode("Café", 128), vec![2, id("cafe"), 3]);
        // No final sigma: lowercased a character at a time, as the fast tokenizer does.
        assert_eq!(basic_tokens("ΟΔΟΣ"), vec!["οδοσ"]);
        assert_eq!(basic_tokens("İstanbul"), vec!["istanbul"]);
    }

    #[test]
    fn punctuation_control_cjk() {
        assert_eq!(
            basic_tokens("a$b's\u{200b}x\u{7}y\u{a0}z (c)"),
            vec!["a", "$", "b", "'", "sxy", "z", "(", "c", ")"]
        );
        assert_eq!(basic_tokens("中国."), vec!["中", "国", "."]);
        assert_eq!(
            basic_tokens("«quoted»—dash"),
            vec!["«", "quoted", "»", "—", "dash"]
        );
        assert_eq!(
            basic_tokens("tab\tnew\nline\r\n"),
            vec!["tab", "new", "line"]
        );
        // Math symbols outside ASCII are not punctuation.
        assert_eq!(basic_tokens("a≤b"), vec!["a≤b"]);
    }

    #[test]
    fn wordpiece_splits() {
        let t = tok();
        assert_eq!(
            t.encode("unaffable running", 128),
            vec![
                2,
                id("un"),
                id("##aff"),
                id("##able"),
                id("run"),
                id("##ning"),
                3
            ]
        );
        // Longest match first: "##able" over "##a".
        assert_eq!(t.encode("unable", 128), vec![2, id("un"), id("##able"), 3]);
        // A word with an unmatched part is one [UNK], whatever matched before it.
        assert_eq!(t.encode("unxyz hello", 128), vec![2, 1, id("hello"), 3]);
        let long = "a".repeat(101);
        assert_eq!(t.encode(&long, 128), vec![2, 1, 3]);
        let ok = "a".repeat(100);
        assert_eq!(t.encode(&ok, 128).len(), 2 + 100);
    }

    #[test]
    fn empty_and_truncation() {
        let t = tok();
        assert_eq!(t.encode("", 128), vec![2, 3]);
        assert_eq!(t.encode(" \t\u{0}\u{fffd} ", 128), vec![2, 3]);
        let text = "hello ".repeat(300);
        let ids = t.encode(&text, 128);
        assert_eq!(ids.len(), 128);
        assert_eq!((ids[0], ids[127]), (2, 3));
        assert!(ids[1..127].iter().all(|&i| i == id("hello")));
        // A word whose pieces cross the limit is cut inside.
        let ids = t.encode("unaffable", 4);
        assert_eq!(ids, vec![2, id("un"), id("##aff"), 3]);
        assert_eq!(t.encode("hello", 0), vec![2, 3]);
    }

    #[test]
    fn vocab_errors() {
        assert!(Tokenizer::from_vocab("[CLS]\n[SEP]\n")
            .unwrap_err()
            .contains("[UNK]"));
        assert_eq!(tok().max_id(), 23);
    }
}
