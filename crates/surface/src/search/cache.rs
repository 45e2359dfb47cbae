//! A built index, kept between runs: what costs the time of a build (each document's words,
//! stemmed, and its vector) as bytes under a key that names exactly what they were made of,
//! the table and every document's text. Where the bytes live is the caller's ([`Cache`]; the
//! gateway keeps files in the user's cache directory); what comes back is checked whole, and
//! anything that is not an index of these documents with this table is built again.
//!
//! The bytes: `moniker-search-index 1\n`, the key (64 hex digits) and `\n`, u32 documents,
//! u32 dims (little-endian), documents x dims f32, each document's words joined by spaces and
//! ended by `\n`, then the SHA-256 of everything before it.

use sha2::{Digest, Sha256};

use super::meaning::Meaning;

const MAGIC: &[u8] = b"moniker-search-index 1\n";

/// Where built indexes are kept between runs, by key.
pub trait Cache: Send + Sync {
    /// The bytes saved under `key`, if any.
    fn load(&self, key: &str) -> Option<Vec<u8>>;
    /// Keeps `bytes` under `key`; a cache that cannot is only slower.
    fn save(&self, key: &str, bytes: &[u8]);
}

/// The key of an index of `documents` (each: its words' text and its meaning's text) with
/// `model`, made by this version of moniker (whose code cuts the words and sums the vectors):
/// a SHA-256, in hex.
pub(super) fn key<'d>(
    model: &Meaning,
    documents: impl Iterator<Item = (&'d str, &'d str)>,
) -> String {
    let mut hash = Sha256::new();
    hash.update(MAGIC);
    hash.update(env!("CARGO_PKG_VERSION"));
    hash.update(model.fingerprint());
    for (words, meaning) in documents {
        // Each text with its length first: no two lists of texts hash alike.
        for text in [words, meaning] {
            hash.update((text.len() as u64).to_le_bytes());
            hash.update(text.as_bytes());
        }
    }
    hex(&hash.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a build made: each document's words (stemmed, joined by spaces) and the vectors.
#[derive(Debug, PartialEq)]
pub(super) struct Built {
    pub stems: Vec<String>,
    pub flat: Vec<f32>,
}

/// The bytes of a build: `stems` and `flat` (`stems.len()` x `dims`), under `key`.
pub(super) fn encode(key: &str, dims: usize, stems: &[String], flat: &[f32]) -> Vec<u8> {
    let text: usize = stems.iter().map(|s| s.len() + 1).sum();
    let mut out = Vec::with_capacity(MAGIC.len() + key.len() + 9 + 4 * flat.len() + text + 32);
    out.extend(MAGIC);
    out.extend(key.as_bytes());
    out.push(b'\n');
    out.extend((stems.len() as u32).to_le_bytes());
    out.extend((dims as u32).to_le_bytes());
    for x in flat {
        out.extend(x.to_le_bytes());
    }
    for words in stems {
        out.extend(words.as_bytes());
        out.push(b'\n');
    }
    let sum = Sha256::digest(&out);
    out.extend(sum);
    out
}

impl Built {
    /// The build in `bytes`, when they are whole and are the one `key` names, of `documents`
    /// documents of `dims` dimensions.
    pub fn decode(bytes: &[u8], key: &str, documents: usize, dims: usize) -> Option<Self> {
        let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(32)?)?;
        if Sha256::digest(body)[..] != *sum {
            return None;
        }
        let rest = body.strip_prefix(MAGIC)?;
        let rest = rest.strip_prefix(key.as_bytes())?.strip_prefix(b"\n")?;
        let (counts, rest) = rest.split_at_checked(8)?;
        let count = |at: usize| {
            u32::from_le_bytes([counts[at], counts[at + 1], counts[at + 2], counts[at + 3]])
                as usize
        };
        if count(0) != documents || count(4) != dims {
            return None;
        }
        let (values, text) = rest.split_at_checked(documents.checked_mul(dims)?.checked_mul(4)?)?;
        let flat = values
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let stems: Vec<String> = std::str::from_utf8(text)
            .ok()?
            .split_terminator('\n')
            .map(str::to_owned)
            .collect();
        (stems.len() == documents && text.last().is_none_or(|b| *b == b'\n'))
            .then_some(Self { stems, flat })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built() -> Built {
        Built {
            stems: vec!["creat issu".into(), String::new(), "list file".into()],
            flat: (0..6).map(|i| i as f32 / 3.0).collect(),
        }
    }

    #[test]
    fn a_build_comes_back_whole_or_not_at_all() {
        let key = "ab".repeat(32);
        let b = built();
        let bytes = encode(&key, 2, &b.stems, &b.flat);
        assert_eq!(Built::decode(&bytes, &key, 3, 2), Some(built()));
        // Another key, other counts: not this build.
        assert_eq!(Built::decode(&bytes, &"cd".repeat(32), 3, 2), None);
        assert_eq!(Built::decode(&bytes, &key, 2, 3), None);
        assert_eq!(Built::decode(&bytes, &key, 3, 3), None);
        // A changed byte anywhere, a cut, more bytes, nothing: refused, never a panic.
        for at in 0..bytes.len() {
            let mut changed = bytes.clone();
            changed[at] ^= 0x20;
            assert_eq!(Built::decode(&changed, &key, 3, 2), None, "byte {at}");
            assert_eq!(Built::decode(&bytes[..at], &key, 3, 2), None, "cut at {at}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(Built::decode(&longer, &key, 3, 2), None);
        assert_eq!(Built::decode(&[], &key, 0, 0), None);
    }

    #[test]
    fn the_key_names_the_table_and_every_text() {
        let model = Meaning::Table(super::super::Model::shipped());
        let k = |docs: &[(&str, &str)]| key(&model, docs.iter().copied());
        let one = k(&[("a b", "a b"), ("c", "c")]);
        assert_eq!(one.len(), 64);
        assert_eq!(one, k(&[("a b", "a b"), ("c", "c")]));
        assert_ne!(one, k(&[("a b", "a b"), ("c", "d")]));
        assert_ne!(one, k(&[("a", "b a b"), ("c", "c")]));
        assert_ne!(one, k(&[("c", "c"), ("a b", "a b")]));
        assert_ne!(one, k(&[("a b", "a b")]));
    }
}
