//! A gate that misbehaves, chosen by config `{"mode": "loop" | "trap" | "fail"}`:
//!
//! - `loop`: never returns (the host's deadline must stop it);
//! - `trap`: panics, which traps;
//! - `fail`: returns a FAIL verdict with one failed criterion (a gate
//!   plugin's FAIL must fail the run).
//!
//! Any other mode is an error result.

use faultline_plugin::gate::*;

pub struct Misbehave;

impl Gate for Misbehave {
    fn evaluate(config: &Config, summary: &RunSummary) -> Result<Verdict, String> {
        match config.str("mode", "")? {
            "loop" => {
                let mut x = 0u64;
                loop {
                    x = core::hint::black_box(x.wrapping_add(1));
                }
            }
            "trap" => panic!("misbehave-gate: trap mode"),
            "fail" => Ok(Verdict::from_criteria(vec![Criterion::fail(
                "misbehave-gate always fails",
                format!("mode `fail` ({} cells seen)", summary.cells.len()),
            )])),
            other => Err(format!("mode must be loop, trap or fail, got `{other}`")),
        }
    }
}

faultline_plugin::export_gate!(Misbehave);
