//! A reader for the safetensors format: an 8-byte little-endian header length, a JSON header
//! naming each tensor's dtype, shape and byte range, then the raw little-endian data.
//!
//! The file is memory-mapped read-only and the f32 tensors are used in place when the host is
//! little-endian and every wanted tensor starts at a multiple of 4 bytes (the mapping itself is
//! page-aligned): then every backend that loads the model shares one copy in the page cache,
//! and only the pages touched (the layers, and the embedding rows of the tokens seen) become
//! resident. Otherwise the wanted tensors are copied into one private `Vec<f32>`.
//!
//! A file changed or truncated on disk while mapped can fault the process (SIGBUS), as any
//! mapping can; the model files are expected to be installed once and left alone.

use memmap2::Mmap;
use serde_json::Value;
use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

/// The largest header accepted (the format's own limit).
const MAX_HEADER: u64 = 100 << 20;

/// One tensor of the header: dtype, shape and byte range within the data section.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub dtype: String,
    pub shape: Vec<usize>,
    pub begin: usize,
    pub end: usize,
}

/// Parses the header of a safetensors file from its first bytes (at least the whole header)
/// given the file's total length: the data section's start and the tensors by name.
pub fn parse_header(
    bytes: &[u8],
    file_len: u64,
) -> Result<(usize, HashMap<String, Entry>), String> {
    if bytes.len() < 8 || file_len < 8 {
        return Err("safetensors file too short for its header length".into());
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    if n > MAX_HEADER {
        return Err(format!("safetensors header length {n} too large"));
    }
    if n > file_len - 8 || (n as usize) > bytes.len() - 8 {
        return Err(format!(
            "safetensors file truncated: header of {n} bytes not all there"
        ));
    }
    let start = 8 + n as usize;
    let data_len = (file_len - start as u64) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..start])
        .map_err(|e| format!("safetensors header is not valid json: {e}"))?;
    let Value::Object(map) = header else {
        return Err("safetensors header is not a json object".into());
    };
    let mut entries = HashMap::new();
    for (name, v) in map {
        if name == "__metadata__" {
            continue;
        }
        let e = parse_entry(&v).map_err(|m| format!("safetensors tensor {name}: {m}"))?;
        if e.end > data_len {
            return Err(format!(
                "safetensors tensor {name}: data ends at {} past the file's {data_len} data bytes",
                e.end
            ));
        }
        entries.insert(name, e);
    }
    Ok((start, entries))
}

fn parse_entry(v: &Value) -> Result<Entry, String> {
    let dtype = v
        .get("dtype")
        .and_then(Value::as_str)
        .ok_or("no dtype string")?
        .to_string();
    let uint = |x: &Value| x.as_u64().and_then(|u| usize::try_from(u).ok());
    let shape = v
        .get("shape")
        .and_then(Value::as_array)
        .ok_or("no shape array")?
        .iter()
        .map(|x| uint(x).ok_or("shape holds a value that is not a size"))
        .collect::<Result<Vec<usize>, _>>()?;
    let offsets = v
        .get("data_offsets")
        .and_then(Value::as_array)
        .filter(|a| a.len() == 2)
        .ok_or("no data_offsets pair")?;
    let (begin, end) = match (uint(&offsets[0]), uint(&offsets[1])) {
        (Some(b), Some(e)) if b <= e => (b, e),
        _ => return Err("bad data_offsets".into()),
    };
    let size = match dtype.as_str() {
        "BOOL" | "U8" | "I8" | "F8_E4M3" | "F8_E5M2" => Some(1),
        "F16" | "BF16" | "I16" | "U16" => Some(2),
        "F32" | "I32" | "U32" => Some(4),
        "F64" | "I64" | "U64" => Some(8),
        _ => None,
    };
    if let Some(size) = size {
        let bytes = shape
            .iter()
            .try_fold(size, |acc: usize, &d| acc.checked_mul(d))
            .ok_or("shape too large")?;
        if bytes != end - begin {
            return Err(format!(
                "shape {shape:?} of {dtype} needs {bytes} bytes, data_offsets give {}",
                end - begin
            ));
        }
    }
    Ok(Entry {
        dtype,
        shape,
        begin,
        end,
    })
}

/// The f32 data the model reads: the mapped file itself, or a private copy.
pub enum Store {
    Mapped(Mmap),
    Owned(Vec<f32>),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.is_mapped() { "mapped" } else { "owned" };
        write!(f, "Store({kind}, {} values)", self.data().len())
    }
}

impl Store {
    /// All the f32 values; a tensor is a range of these.
    pub fn data(&self) -> &[f32] {
        match self {
            Store::Mapped(map) => {
                // The mapping is page-aligned and was checked to hold the tensors at multiples
                // of 4 bytes on a little-endian host; any bit pattern is a valid f32, and the
                // read-only mapping lives as long as `self`.
                unsafe { std::slice::from_raw_parts(map.as_ptr() as *const f32, map.len() / 4) }
            }
            Store::Owned(v) => v,
        }
    }

    /// Whether the tensors are used in place in the mapped file.
    pub fn is_mapped(&self) -> bool {
        matches!(self, Store::Mapped(_))
    }
}

/// Opens a safetensors file and finds the wanted f32 tensors, each with its exact shape: the
/// store and, in the order asked, each tensor's range within `store.data()`.
pub fn load(
    path: &Path,
    wanted: &[(String, Vec<usize>)],
) -> Result<(Store, Vec<Range<usize>>), String> {
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open {shown}: {e}"))?;
    let len = file
        .metadata()
        .map_err(|e| format!("cannot read {shown}: {e}"))?
        .len();
    if len < 8 {
        return Err(format!(
            "{shown}: safetensors file too short for its header length"
        ));
    }
    // Safety: read-only mapping of a file that is not expected to change (see the module doc).
    let map = unsafe { Mmap::map(&file) }.map_err(|e| format!("cannot map {shown}: {e}"))?;
    if map.len() as u64 != len {
        return Err(format!("{shown}: file changed while being read"));
    }
    let (start, entries) = parse_header(&map, len).map_err(|e| format!("{shown}: {e}"))?;
    let mut found = Vec::with_capacity(wanted.len());
    for (name, shape) in wanted {
        let e = entries
            .get(name)
            .ok_or_else(|| format!("{shown}: no tensor {name}"))?;
        if e.dtype != "F32" {
            return Err(format!("{shown}: tensor {name} is {}, not F32", e.dtype));
        }
        if &e.shape != shape {
            return Err(format!(
                "{shown}: tensor {name} has shape {:?}, expected {shape:?}",
                e.shape
            ));
        }
        found.push((start + e.begin, start + e.end));
    }
    let in_place = cfg!(target_endian = "little")
        && (map.as_ptr() as usize).is_multiple_of(std::mem::align_of::<f32>())
        && found.iter().all(|&(b, _)| b.is_multiple_of(4));
    if in_place {
        let ranges = found.iter().map(|&(b, e)| b / 4..e / 4).collect();
        return Ok((Store::Mapped(map), ranges));
    }
    let total: usize = found.iter().map(|&(b, e)| (e - b) / 4).sum();
    let mut data = Vec::with_capacity(total);
    let mut ranges = Vec::with_capacity(found.len());
    for &(b, e) in &found {
        let at = data.len();
        data.extend(
            map[b..e]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap())),
        );
        ranges.push(at..data.len());
    }
    Ok((Store::Owned(data), ranges))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.extend_from_slice(data);
        v
    }

    fn parse(bytes: &[u8]) -> Result<(usize, HashMap<String, Entry>), String> {
        parse_header(bytes, bytes.len() as u64)
    }

    #[test]
    fn good_header() {
        let h = r#"{"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"I64","shape":[1],"data_offsets":[16,24]}}"#;
        let bytes = file(h, &[0u8; 24]);
        let (start, e) = parse(&bytes).unwrap();
        assert_eq!(start, 8 + h.len());
        assert_eq!(e["a"].shape, vec![2, 2]);
        assert_eq!((e["b"].begin, e["b"].end), (16, 24));
    }

    #[test]
    fn bad_headers_are_errors() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "too short"),
            (vec![1, 2, 3], "too short"),
            (u64::MAX.to_le_bytes().to_vec(), "too large"),
            (1000u64.to_le_bytes().to_vec(), "truncated"),
            (file("{not json", &[]), "not valid json"),
            (file("[1,2]", &[]), "not a json object"),
            (file(r#"{"a":1}"#, &[]), "no dtype"),
            (
                file(
                    r#"{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}"#,
                    &[0; 4],
                ),
                "shape",
            ),
            (
                file(
                    r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}}"#,
                    &[0; 4],
                ),
                "data_offsets",
            ),
            (
                file(
                    r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}"#,
                    &[0; 4],
                ),
                "data_offsets",
            ),
            (
                file(
                    r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#,
                    &[0; 4],
                ),
                "needs 8 bytes",
            ),
            (
                file(
                    r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#,
                    &[0; 4],
                ),
                "past the file",
            ),
            (
                file(
                    r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}"#,
                    &[],
                ),
                "too large",
            ),
        ];
        for (bytes, want) in cases {
            let err = parse(&bytes).unwrap_err();
            assert!(err.contains(want), "{err:?} lacks {want:?}");
            assert_eq!(err, err.to_lowercase().replace("f32", "F32"), "{err}");
        }
    }

    fn temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("nl2sql-minilm-{}-{name}", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn load_checks_dtype_shape_and_reads_values() {
        let h = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"i":{"dtype":"I32","shape":[1],"data_offsets":[8,12]}}"#;
        let mut data = Vec::new();
        for x in [1.5f32, -2.0, 0.0] {
            data.extend_from_slice(&x.to_le_bytes());
        }
        let p = temp("load", &file(h, &data));
        let want = |n: &str, s: &[usize]| vec![(n.to_string(), s.to_vec())];
        let (store, r) = load(&p, &want("a", &[2])).unwrap();
        assert_eq!(&store.data()[r[0].clone()], &[1.5, -2.0]);
        // Used in place only where the data section starts at a multiple of 4.
        let aligned = (8 + h.len()).is_multiple_of(4) && cfg!(target_endian = "little");
        assert_eq!(store.is_mapped(), aligned);
        assert!(load(&p, &want("a", &[1, 2]))
            .unwrap_err()
            .contains("expected [1, 2]"));
        assert!(load(&p, &want("i", &[1])).unwrap_err().contains("not F32"));
        assert!(load(&p, &want("z", &[1]))
            .unwrap_err()
            .contains("no tensor z"));
        std::fs::remove_file(&p).unwrap();
        let p = temp("short", &[7, 0, 0]);
        assert!(load(&p, &want("a", &[2]))
            .unwrap_err()
            .contains("too short"));
        std::fs::remove_file(&p).unwrap();
        assert!(load(&p, &want("a", &[2]))
            .unwrap_err()
            .contains("cannot open"));
    }

    #[test]
    fn load_in_place_when_aligned() {
        // Pad the header with spaces (the format allows it) so the data starts at 8 + 56.
        let h = format!(
            "{:<56}",
            r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#
        );
        let p = temp("aligned", &file(&h, &3.25f32.to_le_bytes()));
        let (store, r) = load(&p, &[("a".to_string(), vec![1])]).unwrap();
        assert_eq!(store.is_mapped(), cfg!(target_endian = "little"));
        assert_eq!(&store.data()[r[0].clone()], &[3.25]);
        std::fs::remove_file(&p).unwrap();
    }
}
