//! Text as retrieval and the alignment rules compare it: folded (lowercase, accents removed,
//! every run of anything but letters and digits one space), split into words, and compared by
//! edit distance or, as pg_trgm does, by trigrams. The built-in embedder (retrieval::embed)
//! hashes the same folded words; the value index stores folded keys.

use unicode_normalization::UnicodeNormalization;

/// Characters of a text that are folded (and so embedded); longer texts are cut.
const MAX_CHARS: usize = 256;

/// Lowercase, accents removed, every run of non-alphanumerics one space, trimmed.
pub fn fold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    if text.is_ascii() {
        // Identifiers and most values: nothing to decompose, one byte a character.
        for b in text.bytes().take(MAX_CHARS) {
            if b.is_ascii_alphanumeric() {
                if space && !out.is_empty() {
                    out.push(' ');
                }
                space = false;
                out.push(b.to_ascii_lowercase() as char);
            } else {
                space = true;
            }
        }
        return out;
    }
    for c in text.chars().take(MAX_CHARS).nfkd() {
        if unicode_normalization::char::is_combining_mark(c) {
            continue;
        }
        if c.is_alphanumeric() {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.extend(c.to_lowercase());
        } else {
            space = true;
        }
    }
    out
}

/// The words of a folded text.
pub fn words(folded: &str) -> impl Iterator<Item = &str> {
    folded.split(' ').filter(|w| !w.is_empty())
}

/// 1 - (optimal string alignment distance / longer length), on folded text: one typo or
/// transposition in an 8-letter word gives 0.875.
pub fn edit_similarity(a: &str, b: &str) -> f32 {
    let a: Vec<char> = fold(a).chars().collect();
    let b: Vec<char> = fold(b).chars().collect();
    folded_edit_similarity(&a, &b)
}

/// [`edit_similarity`] of texts already folded, as characters.
pub fn folded_edit_similarity(a: &[char], b: &[char]) -> f32 {
    let n = a.len().max(b.len());
    if n == 0 {
        return 0.0;
    }
    // Three rows of the dynamic programme are enough for adjacent transpositions.
    let mut prev2 = vec![0usize; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0usize; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(prev2[j - 2] + 1);
            }
            cur[j] = d;
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    1.0 - prev[b.len()] as f32 / n as f32
}

/// The trigrams of a text as pg_trgm makes them: lowercase words (runs of letters and digits),
/// each padded with two spaces before and one after, every run of three characters, once each.
fn trigrams(text: &str) -> Vec<[char; 3]> {
    let lower = text.to_lowercase();
    let mut out: Vec<[char; 3]> = Vec::new();
    for word in lower.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let padded: Vec<char> = "  ".chars().chain(word.chars()).chain(std::iter::once(' ')).collect();
        out.extend(padded.windows(3).map(|w| [w[0], w[1], w[2]]));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// pg_trgm's similarity(): shared trigrams over all trigrams of the two texts.
pub fn trigram_similarity(a: &str, b: &str) -> f32 {
    let (x, y) = (trigrams(a), trigrams(b));
    if x.is_empty() || y.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut shared) = (0, 0, 0usize);
    while i < x.len() && j < y.len() {
        match x[i].cmp(&y[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    shared as f32 / (x.len() + y.len() - shared) as f32
}

/// Least similarity for a name to be taken for another.
const NAME_SIMILARITY: f32 = 0.75;

/// The unique name closest to `want` among `names` (case-insensitive, then a typo or a plural
/// away); None when none is close or two are equally close.
/// Linear in the names, each compared only when its length allows (a name's edit distance is at
/// least the difference of lengths), with cancel checked.
pub fn closest_name<'a>(want: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let w: Vec<char> = fold(want).chars().collect();
    let mut scored: Vec<(f32, &str)> = Vec::new();
    for (i, n) in names.enumerate() {
        crate::interrupt::every(i, 256);
        let s = if n.eq_ignore_ascii_case(want) {
            1.0
        } else {
            let c: Vec<char> = fold(n).chars().collect();
            let longest = w.len().max(c.len());
            if longest == 0 || w.len().abs_diff(c.len()) as f32 > (1.0 - NAME_SIMILARITY) * longest as f32 {
                continue;
            }
            folded_edit_similarity(&w, &c)
        };
        if s >= NAME_SIMILARITY {
            scored.push((s, n));
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.dedup_by(|a, b| a.1 == b.1);
    match scored.as_slice() {
        [(_, n)] => Some(n),
        [(a, n), (b, _), ..] if a - b > 0.05 => Some(n),
        _ => None,
    }
}

/// The one name among `names` whose words (split at underscores) contain all of `want`'s in a
/// row: `age` for pet_age, `first name` never (one name, not two).
pub fn name_made_of<'a>(want: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let words: Vec<&str> = want.split('_').filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        return None;
    }
    let found: Vec<&str> = names
        .filter(|n| {
            let parts: Vec<&str> = n.split('_').collect();
            parts.len() > words.len() && parts.windows(words.len()).any(|w| w == words.as_slice())
        })
        .collect();
    match found.as_slice() {
        [one] => Some(one),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding() {
        assert_eq!(fold("  Zürich--Airport (ZRH) "), "zurich airport zrh");
        assert_eq!(fold("ÅNGSTRÖM"), "angstrom");
        assert_eq!(fold("!!!"), "");
        // The ASCII path folds as the general one does (a trailing combining mark forces the
        // general path and folds to nothing).
        for t in ["  Singer_In_Concert--2014 (ZRH) ", "A1b2", "__x__", "Route 66", "", "MiXeD.CaSe/Name"] {
            assert_eq!(fold(t), fold(&format!("{t}\u{301}")), "{t:?}");
        }
        let long = "Ab-".repeat(200);
        assert_eq!(fold(&long), fold(&format!("{long}\u{301}")));
    }

    #[test]
    fn edit_similarity_counts_transpositions_once() {
        assert_eq!(edit_similarity("Aberdeen", "Abredeen"), 0.875);
        assert_eq!(edit_similarity("abc", "abc"), 1.0);
        assert_eq!(edit_similarity("", ""), 0.0);
        assert!((edit_similarity("kitten", "sitting") - (1.0 - 3.0 / 7.0)).abs() < 1e-6);
    }

    #[test]
    fn trigram_similarity_as_pg_trgm() {
        // SELECT similarity('word', 'two words') = 0.36363637 (4 shared of 11)
        assert!((trigram_similarity("word", "two words") - 4.0 / 11.0).abs() < 1e-6);
        assert_eq!(trigram_similarity("Aberdeen", "aberdeen"), 1.0);
        // SELECT similarity('abredeen', 'aberdeen') = 0.3846154
        assert!((trigram_similarity("abredeen", "aberdeen") - 0.3846154).abs() < 1e-5, "{}", trigram_similarity("abredeen", "aberdeen"));
        assert_eq!(trigram_similarity("", "x"), 0.0);
    }
}
