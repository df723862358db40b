//! `faultline check`: the linearizability checker on a recorded Jepsen-style
//! history, so outside histories can be checked with the same code the
//! campaigns use. The budget and the memory cap bound the whole command,
//! reading the file included.

use std::io::{self, BufReader, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use faultline_check::checker::linearizability::{self, Limits, Model, Verdict};
use faultline_check::history::jepsen_edn::{self, ReadError};

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
            return unknown(&mut out, file, &why);
        }
        Err(ReadError::OutOfMemory { line, bytes }) => {
            let why = format!(
                "memory cap of {} MiB reached while reading the file (line {line}, about {} MiB of operations)",
                max_bytes >> 20,
                bytes >> 20
            );
            return unknown(&mut out, file, &why);
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
                writeln!(out, "  {}", w.explanation)?;
                writeln!(out, "  ops involved (times are line numbers of the history):")?;
                for op in &w.ops {
                    writeln!(out, "    {op}")?;
                }
                Ok(())
            })()
        }),
        Verdict::Unknown(why) => return unknown(&mut out, file, &why),
    };
    report_write_error(written.and_then(|()| out.flush()));
    code
}

fn unknown(out: &mut impl Write, file: &Path, why: &str) -> u8 {
    report_write_error(writeln!(out, "{}: unknown — {why}", file.display()).and_then(|()| out.flush()));
    EXIT_UNKNOWN
}

/// A reader that went away is not an error worth a word; anything else
/// (a full disk) is said on stderr.
fn report_write_error(result: io::Result<()>) {
    match result {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => eprintln!("error: cannot write the verdict: {e}"),
        _ => {}
    }
}
