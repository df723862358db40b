//! `faultline check`: the linearizability checker on a recorded Jepsen-style
//! history, so outside histories can be checked with the same code the
//! campaigns use. The budget and the memory cap bound the whole command,
//! reading the file included.

use std::io::{self, BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use faultline_check::checker::jepsen_edn::{self, ReadError};
use faultline_check::checker::linearizability::{self, Limits, Model, Verdict, Witness};

pub const EXIT_LINEARIZABLE: u8 = 0;
pub const EXIT_NOT_LINEARIZABLE: u8 = 1;
pub const EXIT_UNKNOWN: u8 = 2;
pub const EXIT_UNREADABLE: u8 = 3;

pub fn run(model: Model, file: &Path, budget: Duration, max_bytes: usize) -> u8 {
    let started = Instant::now();
    let shown = file.display();
    let input = match crate::input_file::open(file) {
        Ok(f) => BufReader::with_capacity(1 << 16, f),
        Err(e) => {
            eprintln!("error: cannot read {shown}: {e}");
            return EXIT_UNREADABLE;
        }
    };
    let mut out = io::stdout().lock();
    let parsed = match jepsen_edn::read(input, model, started.checked_add(budget), max_bytes) {
        Ok(parsed) => parsed,
        Err(ReadError::Unreadable(e)) => {
            eprintln!("error: {shown}:{}: {}", e.line, e.message);
            return EXIT_UNREADABLE;
        }
        Err(ReadError::Io(e)) => {
            eprintln!("error: cannot read {shown}: {e}");
            return EXIT_UNREADABLE;
        }
        Err(ReadError::OutOfTime { line }) => {
            let why = format!("time budget of {}s ran out while reading the file (line {line})", budget.as_secs_f64());
            return unknown(&mut out, file, &why, started.elapsed());
        }
        Err(ReadError::OutOfMemory { line, bytes }) => {
            let why = format!(
                "memory cap of {} MiB reached while reading the file (line {line}, about {} MiB of operations)",
                max_bytes >> 20,
                bytes >> 20
            );
            return unknown(&mut out, file, &why, started.elapsed());
        }
    };
    let ops = parsed.ops;
    let limits = Limits { budget, started, max_bytes, history_bytes: parsed.bytes, reserve: budget / 50 };
    let checking = Instant::now();
    let verdict = linearizability::check_with_limits(model, &ops, &limits);
    let took = checking.elapsed();
    // A closed stdout (`| head -1`) ends the output quietly; the exit code
    // still tells the verdict.
    let (code, written) = match verdict {
        Verdict::Linearizable => {
            (EXIT_LINEARIZABLE, writeln!(out, "{shown}: linearizable ({} ops, checked in {took:.2?})", ops.len()))
        }
        Verdict::NotLinearizable(w) => (EXIT_NOT_LINEARIZABLE, {
            (|| {
                writeln!(out, "{shown}: NOT linearizable ({} ops, checked in {took:.2?})", ops.len())?;
                if let Some(key) = &w.partition {
                    writeln!(out, "  key: {key}")?;
                }
                writeln!(out, "  {}", search_effort(&w))?;
                writeln!(out, "  {}", w.explanation)?;
                writeln!(out, "  ops involved (times are line numbers of the history):")?;
                for op in &w.ops {
                    writeln!(out, "    {op}")?;
                }
                Ok(())
            })()
        }),
        Verdict::Unknown(why) => return unknown(&mut out, file, &why, started.elapsed()),
    };
    report_write_error(written.and_then(|()| out.flush()));
    code
}

/// The unknown verdict, with when the command gave up counted from its
/// start: how much of the budget it used, as it measured it.
fn unknown(out: &mut impl Write, file: &Path, why: &str, stopped: Duration) -> u8 {
    let line = format!("{}: unknown — {why}; stopped after {:.3} s", file.display(), stopped.as_secs_f64());
    report_write_error(writeln!(out, "{line}").and_then(|()| out.flush()));
    EXIT_UNKNOWN
}

/// How far the search went: the failing partition's steps, and each other
/// partition still undecided with its own. Partitions take turns, so none
/// of those has had much more than the failing one.
fn search_effort(w: &Witness) -> String {
    const MAX_NAMED: usize = 5;
    let steps = faultline_model::format::thousands(w.steps);
    if w.undecided.is_empty() {
        return format!("found after {steps} search steps");
    }
    let mut named: Vec<String> = w
        .undecided
        .iter()
        .take(MAX_NAMED)
        .map(|(partition, steps)| format!("{partition} after {} steps", faultline_model::format::thousands(*steps)))
        .collect();
    if w.undecided.len() > MAX_NAMED {
        named.push(format!("{} more", w.undecided.len() - MAX_NAMED));
    }
    format!("found after {steps} search steps; still undecided then: {}", named.join(", "))
}

/// A reader that went away is not an error worth a word; anything else
/// (a full disk) is said on stderr.
fn report_write_error(result: io::Result<()>) {
    match result {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => eprintln!("error: cannot write the verdict: {e}"),
        _ => {}
    }
}
