//! The fuzz corpora replayed on stable as regression tests (`make fuzz` grows them on
//! nightly), plus a deterministic sweep of pseudo-random inputs through each target.

use std::path::PathBuf;

use cozystack_fuzz_targets as fuzzing;

fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "empty corpus for {target}");
    files
        .into_iter()
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

/// A small xorshift generator: the same inputs on every run.
fn pseudo_random(count: usize, len: usize) -> impl Iterator<Item = Vec<u8>> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..count).map(move |_| {
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    })
}

#[test]
fn settings_corpus() {
    for (name, data) in corpus("settings") {
        eprintln!("{name}");
        fuzzing::settings(&data);
    }
    pseudo_random(500, 48).for_each(|d| fuzzing::settings(&d));
}

#[test]
fn admission_corpus() {
    for (name, data) in corpus("admission") {
        eprintln!("{name}");
        fuzzing::admission(&data);
        // Every prefix of a real payload is a truncated payload: never allowed, never a panic.
        for cut in (0..data.len()).step_by(97) {
            fuzzing::admission(&data[..cut]);
        }
    }
    pseudo_random(500, 64).for_each(|d| fuzzing::admission(&d));
}

#[test]
fn evaluation_corpus() {
    for (name, data) in corpus("evaluation") {
        eprintln!("{name}");
        fuzzing::evaluation(&data);
    }
    pseudo_random(5000, 96).for_each(|d| fuzzing::evaluation(&d));
}

#[test]
fn lists_corpus() {
    for (name, data) in corpus("lists") {
        eprintln!("{name}");
        fuzzing::lists(&data);
        // Every prefix of a list is a truncated list: never read as one.
        for cut in 0..data.len() {
            fuzzing::lists(&data[..cut]);
        }
    }
    pseudo_random(2000, 64).for_each(|d| fuzzing::lists(&d));
}
