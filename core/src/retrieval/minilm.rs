//! all-MiniLM-L6-v2, the sentence-transformers embedding model, run in pure Rust on the CPU:
//! a 6-layer BERT (hidden 384, 12 heads, intermediate 1536), mean pooling over the tokens,
//! L2 normalisation. 384-dimensional unit vectors; cosine similarity is their dot product.
//!
//! [`Model::load`] reads a directory holding `model.safetensors` (f32, the tensor names of
//! Hugging Face's `BertModel` without a `bert.` prefix, as sentence-transformers saves them;
//! a `bert.` prefix is accepted too) and `vocab.txt`. The weights are used in place in the
//! read-only mapped file (see [`weights`]), so backends that load the model share one copy.
//!
//! Texts are cut to [`MAX_TOKENS`] tokens, `[CLS]` and `[SEP]` included. sentence-transformers
//! cuts this model's input at 256; 128 keeps the cost of a long text bounded (attention is
//! quadratic) and the texts embedded here (column and table descriptions, questions) are far
//! shorter.
//!
//! One thread; the dense layers are `matrixmultiply`'s sgemm, over the tokens of several texts
//! at once (each text attends only to its own tokens, so no padding is needed). Batching
//! matters: sgemm repacks all 42 MB of layer weights on every forward pass, so one short text
//! alone costs about 14 ms where, among 200, it costs 5 ms (one core, AVX2; ~40-token texts 28
//! and 18 ms). Memory: the mapped file is 91 MB, of which the layers (42 MB) and the embedding
//! rows of the tokens seen become resident, shared between processes; privately, about 3 MB
//! for the vocabulary and under 4 MB of activations while embedding.

pub mod tokenizer;
pub mod weights;

use std::ops::Range;
use std::path::Path;
use tokenizer::Tokenizer;

/// The embedder's id, stored with every vector it makes.
pub const ID: &str = "all-MiniLM-L6-v2";
/// The dimension of the vectors.
pub const DIMS: usize = 384;
/// The most tokens of a text that are read, `[CLS]` and `[SEP]` included.
pub const MAX_TOKENS: usize = 128;

const HIDDEN: usize = DIMS;
const LAYERS: usize = 6;
const HEADS: usize = 12;
const HEAD_DIM: usize = HIDDEN / HEADS;
const INTER: usize = 1536;
const MAX_POSITIONS: usize = 512;
const TYPES: usize = 2;
const LN_EPS: f32 = 1e-12;
/// The most token rows run through the layers at once: bounds the scratch memory (15 KiB of
/// activations a row, under 4 MiB in all) while keeping sgemm's matrices tall enough.
const BATCH_ROWS: usize = 256;

/// One encoder layer's tensors, as ranges of the weight store.
struct Layer {
    q_w: Range<usize>,
    q_b: Range<usize>,
    k_w: Range<usize>,
    k_b: Range<usize>,
    v_w: Range<usize>,
    v_b: Range<usize>,
    o_w: Range<usize>,
    o_b: Range<usize>,
    ln1_g: Range<usize>,
    ln1_b: Range<usize>,
    i_w: Range<usize>,
    i_b: Range<usize>,
    out_w: Range<usize>,
    out_b: Range<usize>,
    ln2_g: Range<usize>,
    ln2_b: Range<usize>,
}

/// The loaded model: tokenizer and weights. `Send + Sync`; `embed` takes `&self`.
pub struct Model {
    tokenizer: Tokenizer,
    store: weights::Store,
    word: Range<usize>,
    position: Range<usize>,
    token_type: Range<usize>,
    ln_g: Range<usize>,
    ln_b: Range<usize>,
    layers: Vec<Layer>,
}

impl Model {
    /// Loads `model.safetensors` and `vocab.txt` from `dir`, checking every tensor's dtype and
    /// shape.
    pub fn load(dir: &Path) -> Result<Model, String> {
        let vocab_path = dir.join("vocab.txt");
        let vocab = std::fs::read_to_string(&vocab_path)
            .map_err(|e| format!("cannot read {}: {e}", vocab_path.display()))?;
        let tokenizer = Tokenizer::from_vocab(&vocab)?;
        let path = dir.join("model.safetensors");
        let vocab_rows = tokenizer.max_id() as usize + 1;
        // The file's embedding table may be longer than vocab.txt, not shorter: read its rows
        // from the header. The prefix is found the same way.
        let (prefix, rows) = word_rows(&path)?;
        if rows < vocab_rows {
            return Err(format!(
                "vocab.txt has {vocab_rows} tokens but the model embeds only {rows}"
            ));
        }
        let mut wanted: Vec<(String, Vec<usize>)> = Vec::new();
        let mut want = |name: String, shape: &[usize]| {
            wanted.push((format!("{prefix}{name}"), shape.to_vec()));
            wanted.len() - 1
        };
        let e = "embeddings.";
        let emb = [
            want(format!("{e}word_embeddings.weight"), &[rows, HIDDEN]),
            want(
                format!("{e}position_embeddings.weight"),
                &[MAX_POSITIONS, HIDDEN],
            ),
            want(format!("{e}token_type_embeddings.weight"), &[TYPES, HIDDEN]),
            want(format!("{e}LayerNorm.weight"), &[HIDDEN]),
            want(format!("{e}LayerNorm.bias"), &[HIDDEN]),
        ];
        let mut layer_ix = Vec::new();
        for l in 0..LAYERS {
            let p = format!("encoder.layer.{l}.");
            let mut dense = |name: &str, out: usize, inp: usize| {
                [
                    want(format!("{p}{name}.weight"), &[out, inp]),
                    want(format!("{p}{name}.bias"), &[out]),
                ]
            };
            let q = dense("attention.self.query", HIDDEN, HIDDEN);
            let k = dense("attention.self.key", HIDDEN, HIDDEN);
            let v = dense("attention.self.value", HIDDEN, HIDDEN);
            let o = dense("attention.output.dense", HIDDEN, HIDDEN);
            let i = dense("intermediate.dense", INTER, HIDDEN);
            let out = dense("output.dense", HIDDEN, INTER);
            let ln1 = [
                want(format!("{p}attention.output.LayerNorm.weight"), &[HIDDEN]),
                want(format!("{p}attention.output.LayerNorm.bias"), &[HIDDEN]),
            ];
            let ln2 = [
                want(format!("{p}output.LayerNorm.weight"), &[HIDDEN]),
                want(format!("{p}output.LayerNorm.bias"), &[HIDDEN]),
            ];
            layer_ix.push([q, k, v, o, ln1, i, out, ln2]);
        }
        let (store, r) = weights::load(&path, &wanted)?;
        let layers = layer_ix
            .into_iter()
            .map(|[q, k, v, o, ln1, i, out, ln2]| Layer {
                q_w: r[q[0]].clone(),
                q_b: r[q[1]].clone(),
                k_w: r[k[0]].clone(),
                k_b: r[k[1]].clone(),
                v_w: r[v[0]].clone(),
                v_b: r[v[1]].clone(),
                o_w: r[o[0]].clone(),
                o_b: r[o[1]].clone(),
                ln1_g: r[ln1[0]].clone(),
                ln1_b: r[ln1[1]].clone(),
                i_w: r[i[0]].clone(),
                i_b: r[i[1]].clone(),
                out_w: r[out[0]].clone(),
                out_b: r[out[1]].clone(),
                ln2_g: r[ln2[0]].clone(),
                ln2_b: r[ln2[1]].clone(),
            })
            .collect();
        Ok(Model {
            tokenizer,
            word: r[emb[0]].clone(),
            position: r[emb[1]].clone(),
            token_type: r[emb[2]].clone(),
            ln_g: r[emb[3]].clone(),
            ln_b: r[emb[4]].clone(),
            store,
            layers,
        })
    }

    /// Whether the weights are used in place in the mapped file (else a private copy).
    pub fn is_mapped(&self) -> bool {
        self.store.is_mapped()
    }

    /// The token ids of `text` as the model reads it: `[CLS]`, pieces, `[SEP]`, at most
    /// [`MAX_TOKENS`].
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, MAX_TOKENS)
    }

    /// One unit vector of [`DIMS`] values per text, in order. `poll` is called once per text
    /// per layer (and once per batch before it), where the caller may check for a cancel.
    pub fn embed(&self, texts: &[&str], poll: &mut dyn FnMut()) -> Vec<Vec<f32>> {
        let seqs: Vec<Vec<u32>> = texts.iter().map(|t| self.tokenize(t)).collect();
        let mut out = Vec::with_capacity(seqs.len());
        let mut scratch = Scratch::default();
        let mut i = 0;
        while i < seqs.len() {
            let mut j = i;
            let mut rows = 0;
            while j < seqs.len() && (j == i || rows + seqs[j].len() <= BATCH_ROWS) {
                rows += seqs[j].len();
                j += 1;
            }
            poll();
            self.forward(&seqs[i..j], &mut scratch, poll, &mut out);
            i = j;
        }
        out
    }

    fn w(&self, r: &Range<usize>) -> &[f32] {
        &self.store.data()[r.clone()]
    }

    /// Runs the texts' tokens through the model together and pushes one pooled, normalised
    /// vector per text.
    fn forward(
        &self,
        seqs: &[Vec<u32>],
        s: &mut Scratch,
        poll: &mut dyn FnMut(),
        out: &mut Vec<Vec<f32>>,
    ) {
        let m: usize = seqs.iter().map(Vec::len).sum();
        s.resize(m);
        let (word, pos, typ) = (
            self.w(&self.word),
            self.w(&self.position),
            self.w(&self.token_type),
        );
        let mut row = 0;
        for seq in seqs {
            for (p, &id) in seq.iter().enumerate() {
                let x = &mut s.x[row * HIDDEN..(row + 1) * HIDDEN];
                let we = &word[id as usize * HIDDEN..][..HIDDEN];
                let pe = &pos[p * HIDDEN..][..HIDDEN];
                for d in 0..HIDDEN {
                    x[d] = we[d] + pe[d] + typ[d];
                }
                row += 1;
            }
        }
        layer_norm(&mut s.x, self.w(&self.ln_g), self.w(&self.ln_b));
        for l in &self.layers {
            linear(&s.x, HIDDEN, self.w(&l.q_w), self.w(&l.q_b), &mut s.q);
            linear(&s.x, HIDDEN, self.w(&l.k_w), self.w(&l.k_b), &mut s.k);
            linear(&s.x, HIDDEN, self.w(&l.v_w), self.w(&l.v_b), &mut s.v);
            let mut start = 0;
            for seq in seqs {
                poll();
                attention(
                    &s.q,
                    &s.k,
                    &s.v,
                    start,
                    seq.len(),
                    &mut s.scores,
                    &mut s.ctx,
                );
                start += seq.len();
            }
            linear(&s.ctx, HIDDEN, self.w(&l.o_w), self.w(&l.o_b), &mut s.h);
            add(&mut s.h, &s.x);
            layer_norm(&mut s.h, self.w(&l.ln1_g), self.w(&l.ln1_b));
            linear(&s.h, HIDDEN, self.w(&l.i_w), self.w(&l.i_b), &mut s.inter);
            s.inter.iter_mut().for_each(|v| *v = gelu(*v));
            linear(
                &s.inter,
                INTER,
                self.w(&l.out_w),
                self.w(&l.out_b),
                &mut s.x,
            );
            add(&mut s.x, &s.h);
            layer_norm(&mut s.x, self.w(&l.ln2_g), self.w(&l.ln2_b));
        }
        let mut start = 0;
        for seq in seqs {
            let mut v = vec![0f32; HIDDEN];
            for r in start..start + seq.len() {
                for (a, b) in v.iter_mut().zip(&s.x[r * HIDDEN..(r + 1) * HIDDEN]) {
                    *a += b;
                }
            }
            start += seq.len();
            let n = seq.len() as f32;
            v.iter_mut().for_each(|a| *a /= n);
            let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt().max(1e-12);
            v.iter_mut().for_each(|a| *a /= norm);
            out.push(v);
        }
    }
}

/// The prefix of the tensor names ("" or "bert.") and the rows of the word embeddings, read
/// from the header alone.
fn word_rows(path: &Path) -> Result<(&'static str, usize), String> {
    use std::io::Read;
    let shown = path.display();
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot open {shown}: {e}"))?;
    let len = f
        .metadata()
        .map_err(|e| format!("cannot read {shown}: {e}"))?
        .len();
    let mut head = [0u8; 8];
    f.read_exact(&mut head)
        .map_err(|_| format!("{shown}: safetensors file too short for its header length"))?;
    let n = u64::from_le_bytes(head)
        .min(len.saturating_sub(8))
        .min(100 << 20) as usize;
    let mut bytes = head.to_vec();
    bytes.resize(8 + n, 0);
    f.read_exact(&mut bytes[8..])
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    let (_, entries) = weights::parse_header(&bytes, len).map_err(|e| format!("{shown}: {e}"))?;
    for prefix in ["", "bert."] {
        if let Some(e) = entries.get(&format!("{prefix}embeddings.word_embeddings.weight")) {
            return match e.shape[..] {
                [rows, HIDDEN] => Ok((prefix, rows)),
                _ => Err(format!(
                    "{shown}: word embeddings have shape {:?}, expected [rows, {HIDDEN}]",
                    e.shape
                )),
            };
        }
    }
    Err(format!(
        "{shown}: no tensor embeddings.word_embeddings.weight"
    ))
}

/// The activations of one batch of `m` token rows, reused across batches.
#[derive(Default)]
struct Scratch {
    x: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    ctx: Vec<f32>,
    h: Vec<f32>,
    inter: Vec<f32>,
    scores: Vec<f32>,
}

impl Scratch {
    fn resize(&mut self, m: usize) {
        for b in [
            &mut self.x,
            &mut self.q,
            &mut self.k,
            &mut self.v,
            &mut self.ctx,
            &mut self.h,
        ] {
            b.resize(m * HIDDEN, 0.0);
        }
        self.inter.resize(m * INTER, 0.0);
        self.scores.resize(MAX_TOKENS * MAX_TOKENS, 0.0);
    }
}

/// `out = input · wᵀ + b` for row-major `input` (m × k) and a PyTorch `Linear` weight `w`
/// (n × k): `out` is m × n.
fn linear(input: &[f32], k: usize, w: &[f32], b: &[f32], out: &mut [f32]) {
    let n = b.len();
    let m = input.len() / k;
    assert!(input.len() == m * k && w.len() == n * k && out.len() == m * n);
    for row in out.chunks_exact_mut(n) {
        row.copy_from_slice(b);
    }
    // Safety: the asserts above keep every index sgemm reads or writes within the slices:
    // input m×k (row stride k), wᵀ read as k×n with row stride 1 and column stride k, out m×n.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            input.as_ptr(),
            k as isize,
            1,
            w.as_ptr(),
            1,
            k as isize,
            1.0,
            out.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// Multi-head self-attention of one text, rows `start..start + n` of q, k and v (each m × 384,
/// the heads side by side), written to the same rows of `ctx`.
fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    start: usize,
    n: usize,
    scores: &mut [f32],
    ctx: &mut [f32],
) {
    let end = (start + n) * HIDDEN;
    assert!(
        n <= MAX_TOKENS && q.len() >= end && k.len() >= end && v.len() >= end && ctx.len() >= end
    );
    assert!(scores.len() >= n * n);
    let scale = 1.0 / (HEAD_DIM as f32).sqrt();
    let base = start * HIDDEN;
    for h in 0..HEADS {
        let off = base + h * HEAD_DIM;
        // Safety: head h of rows start..start+n spans off + i*HIDDEN + d for i < n, d < 32,
        // all below `end` (checked above); scores is n×n.
        unsafe {
            // scores = scale · Q_h K_hᵀ (n × n)
            matrixmultiply::sgemm(
                n,
                HEAD_DIM,
                n,
                scale,
                q.as_ptr().add(off),
                HIDDEN as isize,
                1,
                k.as_ptr().add(off),
                1,
                HIDDEN as isize,
                0.0,
                scores.as_mut_ptr(),
                n as isize,
                1,
            );
        }
        for row in scores[..n * n].chunks_exact_mut(n) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            for s in row.iter_mut() {
                *s = (*s - max).exp();
                sum += *s;
            }
            row.iter_mut().for_each(|s| *s /= sum);
        }
        unsafe {
            // ctx_h = P V_h (n × 32)
            matrixmultiply::sgemm(
                n,
                n,
                HEAD_DIM,
                1.0,
                scores.as_ptr(),
                n as isize,
                1,
                v.as_ptr().add(off),
                HIDDEN as isize,
                1,
                0.0,
                ctx.as_mut_ptr().add(off),
                HIDDEN as isize,
                1,
            );
        }
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

/// LayerNorm over each row of 384: (x − mean) / √(var + ε) · g + b, the biased variance.
fn layer_norm(x: &mut [f32], g: &[f32], b: &[f32]) {
    for row in x.chunks_exact_mut(HIDDEN) {
        let mean = row.iter().sum::<f32>() / HIDDEN as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / HIDDEN as f32;
        let inv = 1.0 / (var + LN_EPS).sqrt();
        for ((v, g), b) in row.iter_mut().zip(g).zip(b) {
            *v = (*v - mean) * inv * g + b;
        }
    }
}

/// GELU in BERT's exact form, x · Φ(x) = x/2 · (1 + erf(x/√2)).
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2))
}

/// erf to about 1.5e-7 absolute (Abramowitz and Stegun 7.1.26), below f32's rounding of the
/// GELU around it.
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    let y = 1.0 - poly * (-a * a).exp();
    y.copysign(x)
}

#[cfg(test)]
mod tests;
