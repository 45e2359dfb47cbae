//! What calls taught search (DESIGN "The model's view"): when a session's searches are followed
//! by a successful call of a tool, the requests of those searches are kept for the tool
//! ([`Taught::teach`]), and a later request like one of them ranks the tool higher
//! ([`Taught::likeness`]). One principal's [`Taught`] ranks that principal's searches only:
//! the caller keeps one per principal, and never lends it to another.
//!
//! Bounded: [`PER_TOOL`] requests a tool (the newest), [`MAX_BYTES`] a principal (the oldest go
//! first), none older than [`MAX_AGE`]. Pure: the caller says when it is, and keeps it where it
//! likes (the gateway, in the user's state directory).

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use super::{Meaning, Words};

/// The most requests kept for one tool: the newest.
pub const PER_TOOL: usize = 8;
/// The most bytes one principal's lessons take ([`Lesson::bytes`]): the oldest go first.
pub const MAX_BYTES: usize = 512 * 1024;
/// A lesson older than this (in seconds: 90 days) is forgotten.
pub const MAX_AGE: u64 = 90 * 24 * 3600;
/// The longest request kept, in bytes (a search's own bound is larger; a request says itself
/// in far fewer).
pub const MAX_REQUEST: usize = 512;

/// How like a taught request a new one must be before its tool is brought forward: the cosine
/// of their vectors, or the share of words they have in common, whichever is higher. Above it,
/// what a request adds to its taught tool's fused score (whose best is 1) grows with the
/// square of how far above it is: 1 for the same request asked again (its tool comes first),
/// little for one merely of the same kind. Chosen on the tuning pairs
/// (`tasks-learning-tuning.json`), with the table and with a model, as the most a probe gains
/// while the tasks of tools never taught lose at most 3 points at rank 5.
const FLOOR: f32 = 0.2;

/// One principal's lessons, by tool (its exposed name).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Taught {
    tools: BTreeMap<String, Vec<Lesson>>,
}

/// A request a tool was looked for with, when (seconds since the epoch), and its vector.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lesson {
    pub request: String,
    pub at: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meant: Option<Meant>,
    /// Its words, made at its first comparison (a search compares every lesson).
    #[serde(skip)]
    words: std::sync::OnceLock<HashSet<String>>,
}

/// A lesson's vector, by the meaning whose fingerprint (hex) is `by`: eight bits a number,
/// scaled by `scale` (a unit vector's cosine moves by less than 0.01).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meant {
    by: String,
    scale: f32,
    vector: Vec<i8>,
}

impl Meant {
    /// `vector` (a unit vector) of `meaning`, kept in eight bits a number.
    pub fn of(meaning: &Meaning, vector: &[f32]) -> Self {
        let largest = vector.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let scale = if largest > 0.0 { largest / 127.0 } else { 1.0 };
        Self {
            by: hex(meaning.fingerprint()),
            scale,
            // Within ±127 by the scale: the cast cannot wrap.
            vector: vector.iter().map(|x| (x / scale).round() as i8).collect(),
        }
    }

    /// The cosine of `vector` (a unit vector of the same meaning) and this one.
    fn cosine(&self, vector: &[f32]) -> f32 {
        let dot: f32 = self
            .vector
            .iter()
            .zip(vector)
            .map(|(q, x)| f32::from(*q) * x)
            .sum();
        let norm: f32 = self
            .vector
            .iter()
            .map(|q| f32::from(*q) * f32::from(*q))
            .sum::<f32>()
            .sqrt();
        if norm > 0.0 { dot / norm } else { 0.0 }
    }
}

impl Lesson {
    /// `request` (cut to [`MAX_REQUEST`] bytes) asked `at`, with its vector by `meaning` when
    /// it has one.
    pub fn new(request: &str, at: u64, meant: Option<(&Meaning, &[f32])>) -> Self {
        let mut end = request.len().min(MAX_REQUEST);
        while !request.is_char_boundary(end) {
            end -= 1;
        }
        Self {
            request: request[..end].to_owned(),
            at,
            meant: meant.map(|(meaning, vector)| Meant::of(meaning, vector)),
            words: std::sync::OnceLock::new(),
        }
    }

    /// What it costs to keep, roughly: its text and its vector.
    fn bytes(&self) -> usize {
        self.request.len() + self.meant.as_ref().map_or(0, |m| m.vector.len() + 80) + 32
    }
}

/// A request being ranked: its words, and its vector by the index's meaning.
pub struct Asked<'a> {
    pub words: HashSet<String>,
    pub vector: Option<&'a [f32]>,
    /// The fingerprint of the meaning that made `vector`, in hex.
    pub by: String,
}

impl<'a> Asked<'a> {
    pub fn new(text: &str, words: &Words, meaning: &Meaning, vector: Option<&'a [f32]>) -> Self {
        Self {
            words: words.of(text).into_iter().collect(),
            vector,
            by: hex(meaning.fingerprint()),
        }
    }
}

impl Taught {
    /// Whether nothing was taught.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// How many lessons it holds.
    pub fn lessons(&self) -> usize {
        self.tools.values().map(Vec::len).sum()
    }

    /// The tools taught and how many lessons each has, by name.
    pub fn tools(&self) -> impl Iterator<Item = (&str, usize)> {
        self.tools.iter().map(|(t, l)| (t.as_str(), l.len()))
    }

    /// `tool` was called after searches for `lessons`: they are kept for it (one asked again
    /// is kept once, as of now), within the bounds; lessons older than [`MAX_AGE`] go.
    pub fn teach(&mut self, tool: &str, lessons: Vec<Lesson>, now: u64) {
        let kept = self.tools.entry(tool.to_owned()).or_default();
        for lesson in lessons {
            kept.retain(|l| l.request != lesson.request);
            kept.push(lesson);
        }
        kept.sort_by_key(|l| std::cmp::Reverse(l.at));
        kept.truncate(PER_TOOL);
        self.bound(now);
    }

    /// Drops what is past [`MAX_AGE`] at `now`, then the oldest lessons until they fit
    /// [`MAX_BYTES`].
    pub fn bound(&mut self, now: u64) {
        for lessons in self.tools.values_mut() {
            lessons.retain(|l| now.saturating_sub(l.at) <= MAX_AGE);
            lessons.truncate(PER_TOOL);
        }
        self.tools.retain(|_, l| !l.is_empty());
        let mut bytes: usize = self.tools.values().flatten().map(Lesson::bytes).sum();
        while bytes > MAX_BYTES {
            let oldest = self
                .tools
                .iter()
                .filter_map(|(tool, l)| l.last().map(|last| (last.at, tool.clone())))
                .min();
            let Some((_, tool)) = oldest else { break };
            let lessons = self.tools.get_mut(&tool).expect("the tool just found");
            bytes -= lessons.pop().map_or(0, |l| l.bytes());
            if lessons.is_empty() {
                self.tools.remove(&tool);
            }
        }
    }

    /// What a request like each taught tool's adds to its score: (tool, boost) for the tools
    /// it is like enough, by the cosine of the vectors (when of the same meaning) or the share
    /// of words in common (Dice), whichever is higher.
    pub fn likeness(&self, asked: &Asked<'_>, words: &Words) -> Vec<(&str, f32)> {
        let bests: Vec<(&str, f32)> = self
            .tools
            .iter()
            .map(|(tool, lessons)| {
                let best = lessons
                    .iter()
                    .map(|lesson| like(asked, lesson, words))
                    .fold(0.0f32, f32::max);
                (tool.as_str(), best)
            })
            .collect();
        bests
            .into_iter()
            .filter(|(_, best)| *best > FLOOR)
            .map(|(tool, best)| {
                let over = (best - FLOOR) / (1.0 - FLOOR);
                (tool, over * over)
            })
            .collect()
    }
}

/// How like `lesson` the request `asked` is, in [0, 1].
fn like(asked: &Asked<'_>, lesson: &Lesson, words: &Words) -> f32 {
    let cosine = match (&lesson.meant, asked.vector) {
        (Some(meant), Some(vector)) if meant.by == asked.by => meant.cosine(vector),
        _ => 0.0,
    };
    let taught = lesson
        .words
        .get_or_init(|| words.of(&lesson.request).into_iter().collect());
    let shared = taught.intersection(&asked.words).count();
    let total = taught.len() + asked.words.len();
    let dice = if total == 0 {
        0.0
    } else {
        2.0 * shared as f32 / total as f32
    };
    cosine.max(dice)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lesson(request: &str, at: u64) -> Lesson {
        let meaning = Meaning::shipped();
        let vector = meaning.embed(request);
        Lesson::new(request, at, vector.as_deref().map(|v| (&meaning, v)))
    }

    fn boosts(taught: &Taught, request: &str) -> Vec<(String, f32)> {
        let meaning = Meaning::shipped();
        let words = Words::default();
        let vector = meaning.embed(request);
        let asked = Asked::new(request, &words, &meaning, vector.as_deref());
        taught
            .likeness(&asked, &words)
            .into_iter()
            .map(|(t, b)| (t.to_owned(), b))
            .collect()
    }

    #[test]
    fn a_request_asked_again_brings_its_tool_first_and_an_unrelated_one_nothing() {
        let mut taught = Taught::default();
        taught.teach(
            "add_observations",
            vec![lesson("jot down that Alice moved to Berlin", 10)],
            10,
        );
        let again = boosts(&taught, "jot down that Alice moved to Berlin");
        assert_eq!(again.len(), 1);
        assert!(again[0].1 > 0.99, "{again:?}");
        assert!(boosts(&taught, "what is the weather in Lisbon tomorrow").is_empty());
    }

    #[test]
    fn a_tool_keeps_its_newest_requests_and_one_asked_again_once() {
        let mut taught = Taught::default();
        for i in 0..20u64 {
            taught.teach("t", vec![lesson(&format!("request number {i}"), i)], 20);
        }
        taught.teach("t", vec![lesson("request number 19", 21)], 21);
        assert_eq!(taught.lessons(), PER_TOOL);
        let kept = &taught.tools["t"];
        assert_eq!(kept[0].request, "request number 19");
        assert_eq!(kept[0].at, 21);
        assert!(kept.iter().all(|l| l.request != "request number 3"));
    }

    #[test]
    fn old_lessons_go_and_the_bytes_are_bounded() {
        let mut taught = Taught::default();
        taught.teach("old", vec![lesson("from long ago", 0)], 0);
        taught.teach(
            "new",
            vec![lesson("from today", MAX_AGE + 10)],
            MAX_AGE + 10,
        );
        assert_eq!(taught.tools().map(|(t, _)| t).collect::<Vec<_>>(), ["new"]);
        let long = "a ".repeat(MAX_REQUEST);
        for tool in 0..4_000u64 {
            taught.teach(
                &format!("tool {tool}"),
                vec![lesson(&format!("{long}{tool}"), 100 + tool)],
                100 + tool,
            );
        }
        let bytes: usize = taught.tools.values().flatten().map(Lesson::bytes).sum();
        assert!(bytes <= MAX_BYTES, "{bytes}");
        // The newest stay.
        assert!(taught.tools.contains_key("tool 3999"));
        assert!(!taught.tools.contains_key("tool 0"));
        assert!(
            taught
                .tools
                .values()
                .flatten()
                .all(|l| l.request.len() <= MAX_REQUEST)
        );
    }

    #[test]
    fn a_kept_vector_is_the_vector_within_a_hundredth() {
        let meaning = Meaning::shipped();
        let vector = meaning
            .embed("list the files of a folder")
            .expect("known words");
        let meant = Meant::of(&meaning, &vector);
        assert!(
            (meant.cosine(&vector) - 1.0).abs() < 0.01,
            "{}",
            meant.cosine(&vector)
        );
        let text = serde_json::to_string(&meant).expect("json");
        let back: Meant = serde_json::from_str(&text).expect("read back");
        assert_eq!(back, meant);
    }

    #[test]
    fn a_vector_of_another_meaning_is_not_compared() {
        let mut taught = Taught::default();
        let mut lesson = lesson("zz qq", 1);
        lesson.meant = Some(Meant {
            by: "another model".to_owned(),
            scale: 1.0 / 127.0,
            vector: vec![127; 300],
        });
        taught.teach("t", vec![lesson], 1);
        // Its words still count (none shared here), its vector does not.
        assert!(boosts(&taught, "list the files of a folder").is_empty());
    }
}
