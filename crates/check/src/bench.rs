//! `faultline history bench`: times the checkers on a generated history of
//! a given size, so their speed claims come from a measurement anyone can
//! repeat. The history is clean (every read sees the newest acknowledged
//! write), so the checkers must also report no violation.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::checker::{self, Checker};
use crate::history::{HistoryWriter, Observed, OpRecord, Outcome, ValueId};
use faultline_model::ops::OpKind;

const WRITERS: u16 = 64;
/// The generated writes belong to run 0, cell 0.
const SCOPE: crate::history::Scope = crate::history::Scope { run: 0, cell: 0 };

/// Writes `ops` records over `keys` keys into `dir`; returns each key's final value.
pub fn generate(dir: &Path, ops: u64, keys: u64) -> anyhow::Result<HashMap<u64, Option<Vec<u8>>>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(42);
    let mut writers: Vec<HistoryWriter> =
        (0..WRITERS).map(|w| HistoryWriter::create(&dir.join(format!("{w:04}.ops")))).collect::<anyhow::Result<_>>()?;
    let mut last_end = vec![0u64; WRITERS as usize];
    let mut seqs = vec![0u32; WRITERS as usize];
    // Per key: its latest writes as (start, end, id), newest last.
    let mut recent: HashMap<u64, Vec<(u64, u64, ValueId)>> = HashMap::new();
    for i in 0..ops {
        let w = (i % WRITERS as u64) as usize;
        // Ops start 100ns apart and take 50–500us; a connection's ops end in order.
        let start = i * 100;
        let end = (start + rng.random_range(50_000..500_000)).max(last_end[w] + 1);
        last_end[w] = end;
        let key = rng.random_range(0..keys);
        let record = if rng.random_bool(0.3) {
            let id = ValueId { cell: 0, writer: w as u16, seq: seqs[w] };
            seqs[w] += 1;
            let writes = recent.entry(key).or_default();
            writes.push((start, end, id));
            if writes.len() > 8 {
                writes.remove(0);
            }
            OpRecord {
                start,
                end,
                key,
                kind: OpKind::Set,
                outcome: Outcome::Ok,
                written: Some(id),
                written_len: 64,
                member: 0,
                observed: Observed::Nothing,
            }
        } else {
            // A read returns the latest-invoked write acknowledged before it
            // began: never older than anything acknowledged by then.
            let observed = recent
                .get(&key)
                .and_then(|ws| ws.iter().filter(|(_, e, _)| *e < start).max_by_key(|(s, _, _)| *s))
                .map_or(Observed::Nil, |(_, _, id)| Observed::Write(*id));
            OpRecord {
                start,
                end,
                key,
                kind: OpKind::Get,
                outcome: Outcome::Ok,
                written: None,
                written_len: 0,
                member: 0,
                observed,
            }
        };
        writers[w].append(&record);
    }
    for w in writers {
        w.finish()?;
    }
    // The final value: the latest-invoked write (all have ended by now).
    Ok(recent
        .into_iter()
        .map(|(key, ws)| {
            let (_, _, id) = *ws.iter().max_by_key(|(s, _, _)| *s).expect("a key in `recent` has a write");
            let mut v = Vec::new();
            crate::history::write_value(0, id, 64, &mut v);
            (key, Some(v))
        })
        .collect())
}

fn stale_read() -> &'static dyn Checker {
    checker::named("stale-read-after-ack").expect("a registered checker")
}

fn lost_write() -> &'static dyn Checker {
    checker::named(checker::lost_write::NAME).expect("a registered checker")
}

/// Generates, then times the first pass (which carries stale-read-after-ack)
/// and lost-acknowledged-write. Says one line per measurement through `say`
/// (the CLI prints them; nothing here writes to the terminal).
pub fn bench(ops: u64, keys: u64, say: &mut dyn FnMut(String)) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let started = Instant::now();
    let final_values = generate(dir.path(), ops, keys)?;
    say(format!("generated {ops} ops over {keys} keys in {:.1}s", started.elapsed().as_secs_f64()));

    let started = Instant::now();
    let pass = checker::first_pass(dir.path(), &[stale_read()], Duration::from_secs(6))?;
    let took = started.elapsed();
    let (stale, _) = checker::run(
        dir.path(),
        &[stale_read()],
        pass,
        checker::Stored { values: &final_values, items: None, fresh_keys: false },
        SCOPE,
        Duration::ZERO,
        &[],
    );
    say(format!(
        "stale-read-after-ack (with the merge and write table): {:.2}s, {:.2}M ops/s, {} reads judged, {} violations",
        took.as_secs_f64(),
        ops as f64 / took.as_secs_f64() / 1e6,
        stale[0].checked,
        stale[0].violations
    ));

    let pass = checker::first_pass(dir.path(), &[], Duration::from_secs(6))?;
    let started = Instant::now();
    let (lost, _) = checker::run(
        dir.path(),
        &[lost_write()],
        pass,
        checker::Stored { values: &final_values, items: None, fresh_keys: false },
        SCOPE,
        Duration::ZERO,
        &[],
    );
    let took = started.elapsed();
    say(format!(
        "lost-acknowledged-write (after the first pass): {:.3}s, {:.2}M ops/s, {} writes judged, {} violations",
        took.as_secs_f64(),
        ops as f64 / took.as_secs_f64() / 1e6,
        lost[0].checked,
        lost[0].violations
    ));
    say(format!("peak RSS: {} MiB", peak_rss_mib()));
    anyhow::ensure!(stale[0].violations == 0 && lost[0].violations == 0, "a clean history was reported as violating");
    Ok(())
}

fn peak_rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok()))
        })
        .flatten()
        .map_or(0, |kb| kb / 1024)
}
