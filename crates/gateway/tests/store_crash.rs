//! Killing moniker with SIGKILL while it writes the toolset store loses nothing that was
//! acknowledged, and never leaves a store that does not parse.
//!
//! The parent test re-executes this test binary to run `crash_child` (ignored, so it does not
//! run on its own), which keeps `put`ting toolsets and prints `ack <name>` after each `put`
//! returns. The parent SIGKILLs it shortly after its first acknowledgement, then opens the store
//! and checks every acknowledged toolset is there. The same store is used for every round, so
//! each child also opens a store that was just crashed into.

#![allow(
    clippy::too_many_lines,
    reason = "a test is one scenario, read from top to bottom"
)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use moniker_gateway::store::{Opened, Store, StoredTool, StoredToolset};

const PATH_VAR: &str = "MONIKER_STORE_CRASH_PATH";
const ROUND_VAR: &str = "MONIKER_STORE_CRASH_ROUND";
const ROUNDS: u32 = 30;
const TIME_BUDGET: Duration = Duration::from_secs(30);
const MAX_DELAY_MS: u64 = 30;

fn toolset(round: u32, i: u32) -> StoredToolset {
    StoredToolset {
        description: Some(format!("round {round}, toolset {i}")),
        tools: (0..4)
            .map(|t| StoredTool {
                name: format!("server{t}__tool_{i}"),
                alias: (t % 2 == 0).then(|| format!("alias_{t}")),
            })
            .collect(),
        prompts: vec![format!("server0__prompt_{i}")],
    }
}

/// The writer that gets killed. Runs only when the parent re-executes the binary.
#[test]
#[ignore = "run by `sigkill_while_writing_loses_nothing_acknowledged` in a child process"]
fn crash_child() {
    let path = PathBuf::from(std::env::var_os(PATH_VAR).expect("store path variable"));
    let round: u32 = std::env::var(ROUND_VAR)
        .expect("round variable")
        .parse()
        .expect("round number");
    let (mut store, opened) = Store::open(path);
    assert!(
        matches!(opened, Opened::Fresh | Opened::Loaded),
        "the crashed store must open cleanly: {opened:?}"
    );
    let stdout = std::io::stdout();
    let started = Instant::now();
    // Bounded, in case the parent goes away without killing us.
    for i in 0.. {
        if started.elapsed() > Duration::from_secs(20) {
            break;
        }
        let name = format!("r{round}-t{i}");
        store.put(&name, toolset(round, i)).expect("put");
        let mut out = stdout.lock();
        writeln!(out, "ack {name}").expect("write ack");
        out.flush().expect("flush ack");
    }
}

/// A small xorshift generator: the delays vary per run, and the seed is printed so a failing
/// run can be told apart.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn sigkill_while_writing_loses_nothing_acknowledged() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("data").join("toolsets.json");
    let exe = std::env::current_exe().unwrap();
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut rng = Rng(seed);
    eprintln!("store crash test: seed {seed}");

    let started = Instant::now();
    let mut acknowledged = BTreeSet::new();
    let mut rounds = 0;
    // Rounds whose kill left a temporary file (killed mid-write), and rounds whose store holds
    // a toolset that was never acknowledged (killed between the rename and the ack).
    let mut mid_write = 0;
    let mut unacknowledged = 0;
    for round in 0..ROUNDS {
        if started.elapsed() > TIME_BUDGET {
            break;
        }
        // Rounds 0 and 1 kill at once and at the longest delay; the rest vary.
        let delay_ms = match round {
            0 => 0,
            1 => MAX_DELAY_MS,
            _ => rng.next() % (MAX_DELAY_MS + 1),
        };
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "store_crash::crash_child",
                "--nocapture",
                "--ignored",
            ])
            .env(PATH_VAR, &path)
            .env(ROUND_VAR, round.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();

        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(name) = line.strip_prefix("ack ") {
                    if tx.send(name.to_owned()).is_err() {
                        break;
                    }
                }
            }
        });

        let first = rx.recv_timeout(Duration::from_secs(20));
        let first = match first {
            Ok(name) => name,
            Err(e) => {
                let _ = child.kill();
                let status = child.wait().unwrap();
                panic!("round {round}: no acknowledgement from the child ({e}; {status})");
            }
        };
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        let status = child.wait().unwrap();
        if status.success() {
            panic!("round {round}: the child finished before it was killed");
        }
        reader.join().unwrap();
        // Everything the child acknowledged before it died: the pipe keeps what it wrote.
        let before = acknowledged.len();
        acknowledged.insert(first);
        acknowledged.extend(rx.try_iter());
        let acked_this_round = acknowledged.len() - before;

        let names = || -> Vec<String> {
            std::fs::read_dir(path.parent().unwrap())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n != "toolsets.json")
                .collect()
        };
        if !names().is_empty() {
            mid_write += 1;
        }
        let (store, opened) = Store::open(path.clone());
        assert_eq!(
            opened,
            Opened::Loaded,
            "round {round} (delay {delay_ms} ms, seed {seed}): the store must parse"
        );
        for name in &acknowledged {
            assert!(
                store.toolsets().contains_key(name),
                "round {round} (delay {delay_ms} ms, seed {seed}): acknowledged toolset \
                 {name} is lost"
            );
        }
        for (name, stored) in store.toolsets() {
            let (r, i) = name
                .strip_prefix('r')
                .and_then(|rest| rest.split_once("-t"))
                .map(|(r, i)| (r.parse().unwrap(), i.parse().unwrap()))
                .unwrap();
            assert_eq!(stored, &toolset(r, i), "toolset {name} is intact");
        }
        let prefix = format!("r{round}-");
        if store
            .toolsets()
            .keys()
            .filter(|n| n.starts_with(&prefix))
            .count()
            > acked_this_round
        {
            unacknowledged += 1;
        }
        // The killed writer's temporary file, if any, was cleaned up by opening.
        let leftovers = names();
        assert!(
            leftovers.is_empty(),
            "round {round}: left over {leftovers:?}"
        );
        rounds += 1;
    }
    eprintln!(
        "store crash test: {rounds} rounds ({mid_write} killed mid-write, {unacknowledged} \
         after a durable but unacknowledged put), {} acknowledged toolsets, {:?}",
        acknowledged.len(),
        started.elapsed()
    );
    assert!(
        rounds >= 5,
        "only {rounds} rounds ran within the time budget"
    );
}
