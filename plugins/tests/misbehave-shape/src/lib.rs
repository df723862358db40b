//! A workload shape that misbehaves in `next-ops`, chosen by config
//! `{"mode": "loop" | "memory" | "trap" | "malformed"}`:
//!
//! - `loop`: never returns (the host's deadline must stop it);
//! - `memory`: allocates without bound (the host's memory limit must stop it);
//! - `trap`: panics, which traps;
//! - `malformed`: returns ops of kind 200, which no spec declares (kinds
//!   are indices into `setup.ops`).
//!
//! `init` behaves; any other mode is an init error.

use faultline_plugin::shape::*;

enum Mode {
    Loop,
    Memory,
    Trap,
    Malformed,
}

pub struct Misbehave {
    mode: Mode,
    hoard: Vec<Vec<u8>>,
}

impl Shape for Misbehave {
    fn init(config: &Config, _seed: u64, _setup: &Setup) -> Result<Self, String> {
        let mode = match config.str("mode", "")? {
            "loop" => Mode::Loop,
            "memory" => Mode::Memory,
            "trap" => Mode::Trap,
            "malformed" => Mode::Malformed,
            other => return Err(format!("mode must be loop, memory, trap or malformed, got `{other}`")),
        };
        Ok(Misbehave { mode, hoard: Vec::new() })
    }

    fn next_ops(&mut self, _worker: u32, n: u32, out: &mut Ops) {
        match self.mode {
            Mode::Loop => {
                let mut x = 0u64;
                loop {
                    // Opaque to the optimizer, so the loop is not removed.
                    x = core::hint::black_box(x.wrapping_add(1));
                }
            }
            Mode::Memory => loop {
                // 1 MiB at a time, each page touched so it is really used.
                let mut chunk = vec![0u8; 1 << 20];
                for i in (0..chunk.len()).step_by(4096) {
                    chunk[i] = 1;
                }
                self.hoard.push(core::hint::black_box(chunk));
            },
            Mode::Trap => panic!("misbehave-shape: trap mode"),
            Mode::Malformed => {
                for key in 0..n as u64 {
                    out.push(Op::new(200, key, 0));
                }
            }
        }
    }
}

faultline_plugin::export_shape!(Misbehave);
