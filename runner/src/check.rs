//! `faultline check`: the linearizability checker on a recorded Jepsen-style
//! history, so outside histories can be checked with the same code the
//! campaigns use.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::checker::linearizability::{self, Model, Verdict};
use crate::history::jepsen_edn;

pub const EXIT_LINEARIZABLE: u8 = 0;
pub const EXIT_NOT_LINEARIZABLE: u8 = 1;
pub const EXIT_UNKNOWN: u8 = 2;
pub const EXIT_UNREADABLE: u8 = 3;

pub fn run(model: Model, file: &Path, budget: Duration) -> u8 {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: cannot read {}: {e}", file.display());
            return EXIT_UNREADABLE;
        }
    };
    let ops = match jepsen_edn::parse(&text, model) {
        Ok(ops) => ops,
        Err(e) => {
            eprintln!("error: {}:{}: {}", file.display(), e.line, e.message);
            return EXIT_UNREADABLE;
        }
    };
    let started = Instant::now();
    let verdict = linearizability::check(model, &ops, budget);
    let took = started.elapsed();
    match verdict {
        Verdict::Linearizable => {
            println!("{}: linearizable ({} ops, checked in {took:.2?})", file.display(), ops.len());
            EXIT_LINEARIZABLE
        }
        Verdict::NotLinearizable(w) => {
            println!("{}: NOT linearizable ({} ops, checked in {took:.2?})", file.display(), ops.len());
            if let Some(key) = &w.partition {
                println!("  key: {key}");
            }
            println!("  {}", w.explanation);
            println!("  ops involved (times are line numbers of the history):");
            for op in &w.ops {
                println!("    {op}");
            }
            EXIT_NOT_LINEARIZABLE
        }
        Verdict::Unknown(why) => {
            println!("{}: unknown — {why}", file.display());
            EXIT_UNKNOWN
        }
    }
}
