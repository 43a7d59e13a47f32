//! The built-in embedder: no network, no model files. Text is folded (lowercase, accents
//! removed; crate::text), then hashed features — word tokens, character trigrams and bigrams
//! with word boundaries, skip-bigrams, and the bag of letters — are summed into a signed hashed
//! vector and L2-normalised. Cosine similarity then tolerates case and accents, keeps typos and
//! transpositions near (0.5–0.8 for one edit in a short word) and unrelated words apart
//! (below 0.55), and a word inside a longer value still scores. The embedding generates
//! candidates; [`score`] adds edit similarity so that one typo always clears the threshold.

use crate::text::{edit_similarity, fold, words};

/// Dimensions of the built-in dense embedding (nl2sql.embedding(); the index uses signatures).
pub const BUILTIN_DIMS: usize = 256;
/// Identifies the embedder and its version; an index built by another embedder is stale.
pub const BUILTIN_ID: &str = "builtin-v1";

// Chosen to keep one-edit typos as near as possible while unrelated words stay under 0.55.
// The signature relies on every weight being 0.5 or 0.3 (see `signature`).
const W_WORD: f32 = 0.5;
const W_TRIGRAM: f32 = 0.5;
const W_BIGRAM: f32 = 0.5;
const W_SKIP: f32 = 0.3;
const W_LETTER: f32 = 0.3;

/// FNV-1a, 64 bit: stable across platforms and releases, which stored vectors rely on.
fn hash(kind: u8, parts: &[char]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ kind as u64;
    h = h.wrapping_mul(0x0000_0100_0000_01b3);
    for c in parts {
        for b in (*c as u32).to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

fn add(v: &mut [f32], h: u64, w: f32) {
    let i = (h % v.len() as u64) as usize;
    // The top bit picks the sign, so colliding features cancel on average instead of adding up.
    v[i] += if h >> 63 == 0 { w } else { -w };
}

/// Calls `f(hash, weight)` for every feature of a text, repeats included.
fn for_each_feature(text: &str, mut f: impl FnMut(u64, f32)) {
    let folded = fold(text);
    let mut marked: Vec<char> = Vec::with_capacity(32);
    for word in words(&folded) {
        marked.clear();
        marked.push('^');
        marked.extend(word.chars());
        marked.push('$');
        let chars = &marked[1..marked.len() - 1];
        f(hash(b'w', chars), W_WORD);
        for t in marked.windows(3) {
            f(hash(b't', t), W_TRIGRAM);
        }
        for b in marked.windows(2) {
            f(hash(b'b', b), W_BIGRAM);
        }
        for s in chars.windows(3) {
            f(hash(b's', &[s[0], s[2]]), W_SKIP);
        }
        for c in chars {
            f(hash(b'l', std::slice::from_ref(c)), W_LETTER);
        }
    }
}

/// The weighted features of a text: (feature hash, weight), merged, sorted by hash.
pub fn features(text: &str) -> Vec<(u64, f32)> {
    let mut f: Vec<(u64, f32)> = Vec::new();
    for_each_feature(text, |h, w| f.push((h, w)));
    f.sort_unstable_by_key(|x| x.0);
    let mut merged: Vec<(u64, f32)> = Vec::with_capacity(f.len());
    for (h, w) in f {
        match merged.last_mut() {
            Some(last) if last.0 == h => last.1 += w,
            _ => merged.push((h, w)),
        }
    }
    merged
}

/// Exact cosine similarity of two feature sets (no hashing collisions).
pub fn feature_cosine(a: &[(u64, f32)], b: &[(u64, f32)]) -> f32 {
    let (mut i, mut j, mut dot) = (0, 0, 0f32);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                dot += a[i].1 * b[j].1;
                i += 1;
                j += 1;
            }
        }
    }
    let na = a.iter().map(|x| x.1 * x.1).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x.1 * x.1).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

/// The built-in embedding of `text` as a dense vector of `dims` dimensions (signed feature
/// hashing), L2-normalised; all zeros for text without letters or digits.
pub fn embed(text: &str, dims: usize) -> Vec<f32> {
    let mut v = vec![0f32; dims.max(1)];
    for (h, w) in features(text) {
        add(&mut v, h, w);
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Bits of the SimHash signature.
pub const SIGNATURE_BITS: usize = 256;

/// The 256-bit pseudo-random hyperplane pattern of a feature (splitmix64 of its hash).
fn pattern(h: u64) -> [u64; 4] {
    let mut out = [0u64; 4];
    for (word, o) in out.iter_mut().enumerate() {
        let mut z = h ^ (word as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        *o = z ^ (z >> 31);
    }
    out
}

/// Planes of a bit-sliced counter: plane p holds bit p of every position's count.
const PLANES: usize = 12;

/// Per-position counts of set bits over many 256-bit patterns, kept bit-sliced: adding a
/// pattern is a ripple-carry over whole 64-bit words, not 256 additions.
struct SlicedCounts {
    planes: [[u64; 4]; PLANES],
    n: i32,
}

impl SlicedCounts {
    fn new() -> SlicedCounts {
        SlicedCounts { planes: [[0; 4]; PLANES], n: 0 }
    }

    fn add(&mut self, p: &[u64; 4]) {
        self.n += 1;
        for w in 0..4 {
            let mut carry = p[w];
            for plane in self.planes.iter_mut() {
                if carry == 0 {
                    break;
                }
                let next = plane[w] & carry;
                plane[w] ^= carry;
                carry = next;
            }
        }
    }

    /// The count at bit position i (0 = most significant of word 0).
    fn count(&self, i: usize) -> i32 {
        let (w, shift) = (i / 64, 63 - i % 64);
        (0..PLANES).map(|p| (((self.planes[p][w] >> shift) & 1) as i32) << p).sum()
    }
}

/// A 256-bit SimHash of the features: bit i is the sign of the features' weights projected on
/// a pseudo-random hyperplane, Σ w·(+1 if the feature's pattern has bit i, else −1). The
/// Hamming distance of two signatures estimates the angle between their feature vectors
/// (distance / 256 ≈ angle / π), which pgvector's HNSW index on `bit(256)` searches fast.
/// The weights are two integer classes (5 and 3 tenths), so each bit is exactly
/// 2·(5·count₅ + 3·count₃) − (5·n₅ + 3·n₃) > 0, with the counts kept bit-sliced.
/// Returned as four 64-bit words, most significant bit first.
pub fn signature(text: &str) -> [u64; 4] {
    let mut five = SlicedCounts::new();
    let mut three = SlicedCounts::new();
    for_each_feature(text, |h, w| {
        let p = pattern(h);
        if (w * 10.0).round() as i32 == 5 {
            five.add(&p)
        } else {
            three.add(&p)
        }
    });
    let total = 5 * five.n + 3 * three.n;
    let mut out = [0u64; 4];
    for i in 0..SIGNATURE_BITS {
        if 2 * (5 * five.count(i) + 3 * three.count(i)) > total {
            out[i / 64] |= 1 << (63 - i % 64);
        }
    }
    out
}

/// The signature as pgvector's bit literal text ('0101…').
pub fn signature_text(text: &str) -> String {
    signature(text).iter().map(|w| format!("{w:064b}")).collect()
}

/// Hamming distance of two signatures.
pub fn hamming(a: &[u64; 4], b: &[u64; 4]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// Cosine similarity of two L2-normalised vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The retrieval score of a stored text for a query text, given their embedding cosine:
/// the better of the two similarities.
pub fn score(query: &str, stored: &str, cosine: f32) -> f32 {
    cosine.max(edit_similarity(query, stored))
}

/// The phrases of a value for split retrieval: its words, and its runs of two words, when it
/// has more than one word. A question mentioning "Aberdeen" then finds "Aberdeen Airport".
pub fn phrases(value: &str, max: usize) -> Vec<String> {
    let folded = fold(value);
    let ws: Vec<&str> = words(&folded).collect();
    if ws.len() < 2 {
        return vec![];
    }
    let mut out: Vec<String> = Vec::new();
    for w in &ws {
        if w.chars().count() >= 3 && !out.iter().any(|p| p == w) {
            out.push(w.to_string());
        }
    }
    if ws.len() > 2 {
        for pair in ws.windows(2) {
            let p = pair.join(" ");
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out.truncate(max);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sim(a: &str, b: &str) -> f32 {
        feature_cosine(&features(a), &features(b))
    }

    fn final_score(a: &str, b: &str) -> f32 {
        score(a, b, sim(a, b))
    }

    #[test]
    fn the_issue_examples_match() {
        assert!(sim("Aberdeen", "ABERDEEN") > 0.999);
        assert!(sim("Aberdeen", "aberdeen") > 0.999);
        // A typo: near enough for the index to find it, and scored above the 0.65 threshold.
        assert!(sim("Aberdeen", "Abredeen") > 0.5, "{}", sim("Aberdeen", "Abredeen"));
        assert!(final_score("Aberdeen", "Abredeen") >= 0.85);
        // A longer value holding the word, even before split retrieval.
        assert!(sim("Aberdeen", "aberdeen airport") >= 0.65, "{}", sim("Aberdeen", "aberdeen airport"));
    }

    #[test]
    fn typos_are_near_for_the_index() {
        for (a, b) in [("Glasgow", "Glasow"), ("Netherlands", "Netherland"), ("Toyota", "Toyata"), ("Johnson", "Jonson")] {
            assert!(sim(a, b) > 0.5, "{a} ~ {b}: {}", sim(a, b));
            assert!(final_score(a, b) >= 0.65, "{a} ~ {b}: {}", final_score(a, b));
        }
    }

    #[test]
    fn unrelated_values_stay_apart() {
        for (a, b) in [("Aberdeen", "Glasgow"), ("France", "Netherlands"), ("cat", "dog"), ("Ford", "Toyota"),
                       ("Aberdeen", "Airport"), ("John", "Joan Smith"), ("listen", "silent"), ("Mercedes", "Dresden")] {
            let s = sim(a, b);
            assert!(s < 0.6, "{a} ~ {b}: {s}");
            assert!(final_score(a, b) < 0.65, "{a} ~ {b}: {}", final_score(a, b));
        }
    }

    #[test]
    fn hashed_vectors_approximate_the_exact_cosine() {
        for (a, b) in [("Aberdeen", "Abredeen"), ("Aberdeen", "Glasgow"), ("Aberdeen", "aberdeen airport")] {
            let dense = cosine(&embed(a, BUILTIN_DIMS), &embed(b, BUILTIN_DIMS));
            assert!((dense - sim(a, b)).abs() < 0.15, "{a} ~ {b}: {dense} vs {}", sim(a, b));
        }
    }

    /// The signature the plain way: one signed addition per feature and bit.
    fn signature_reference(text: &str) -> [u64; 4] {
        let mut acc = [0i32; SIGNATURE_BITS];
        for_each_feature(text, |h, w| {
            let w = (w * 10.0).round() as i32;
            let p = pattern(h);
            for (i, a) in acc.iter_mut().enumerate() {
                *a += if (p[i / 64] >> (63 - i % 64)) & 1 == 1 { w } else { -w };
            }
        });
        let mut out = [0u64; 4];
        for (i, a) in acc.iter().enumerate() {
            if *a > 0 {
                out[i / 64] |= 1 << (63 - i % 64);
            }
        }
        out
    }

    #[test]
    fn bit_sliced_signature_equals_the_plain_sum() {
        let long = "word ".repeat(60);
        for t in ["Aberdeen", "Zürich Airport", "Fbdjkgt Heiacnoe", "a", "", "x y z 1 2 3", long.as_str()] {
            assert_eq!(signature(t), signature_reference(t), "{t}");
        }
        for w in [W_WORD, W_TRIGRAM, W_BIGRAM, W_SKIP, W_LETTER] {
            assert!(w == 0.5 || w == 0.3);
        }
    }

    #[test]
    fn signatures_track_similarity() {
        let d = |a: &str, b: &str| hamming(&signature(a), &signature(b));
        assert_eq!(d("Aberdeen", "ABERDEEN"), 0);
        // Near pairs are much closer than far pairs (expected 256 * angle / pi).
        assert!(d("Aberdeen", "Abredeen") < 70, "{}", d("Aberdeen", "Abredeen"));
        assert!(d("Aberdeen", "Glasgow") > 100, "{}", d("Aberdeen", "Glasgow"));
        assert!(d("Aberdeen", "Abredeen") < d("Aberdeen", "Airport"));
        assert_eq!(signature_text("x").len(), 256);
    }

    #[test]
    fn accents_and_case_do_not_matter() {
        assert!(sim("Zürich", "ZURICH") > 0.999);
        assert!(sim("São Paulo", "sao paulo") > 0.999);
    }

    #[test]
    fn vectors_are_normalised_and_stable() {
        let v = embed("Aberdeen", BUILTIN_DIMS);
        assert_eq!(v.len(), BUILTIN_DIMS);
        assert!((cosine(&v, &v) - 1.0).abs() < 1e-5);
        assert_eq!(embed("", 8), vec![0.0; 8]);
        // Stored signatures must not change between releases without a new BUILTIN_ID: pin one.
        assert_eq!(signature("Aberdeen"), PINNED, "signature changed: {:x?}", signature("Aberdeen"));
    }
    const PINNED: [u64; 4] = [0xa8e2_0ff9_9b8a_f824, 0x2962_1300_8157_2044, 0xa7c0_759a_8443_a890, 0x0b1c_6f8d_179a_8326];

    #[test]
    fn phrases_for_split_retrieval() {
        assert_eq!(phrases("Aberdeen Airport", 8), vec!["aberdeen", "airport"]);
        assert_eq!(phrases("Royal Bank of Scotland", 8),
                   vec!["royal", "bank", "scotland", "royal bank", "bank of", "of scotland"]);
        assert!(phrases("Aberdeen", 8).is_empty());
        assert_eq!(phrases("a b c d e f g h i j", 3).len(), 3);
    }

}
