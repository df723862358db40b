//! final-state: each key's final value is exactly one write's whole value —
//! no torn, truncated or mixed items (the DynamoDB seed's invariant).

use std::collections::HashMap;

use super::{describe_write, CheckResult, CheckerName, Writes, WITNESSES};
use crate::history::{is_whole_value, parse_value, Observed, Outcome};

pub fn check(writes: &Writes, final_values: &HashMap<u64, Option<Vec<u8>>>, cell: u16) -> CheckResult {
    let (mut checked, mut bad, mut witnesses) = (0u64, 0u64, Vec::new());
    let mut keys: Vec<&u64> = final_values.keys().collect();
    keys.sort();
    for key in keys {
        let Some(value) = final_values[key].as_deref() else { continue };
        checked += 1;
        let problem = match parse_value(value, cell) {
            Observed::Write(id) => match writes.get(id) {
                Some(w) if w.outcome == Outcome::Fail => Some(format!("holds {}, which failed", describe_write(id))),
                Some(w) if w.key != *key => {
                    Some(format!("holds {}, which was a write to key {}", describe_write(id), w.key))
                }
                Some(w) if !is_whole_value(value, id, w.len as usize) => Some(format!(
                    "holds a torn or mixed value: {} bytes starting like {} ({} bytes)",
                    value.len(),
                    describe_write(id),
                    w.len
                )),
                Some(_) => None,
                None => Some(format!("holds {}, which no client issued", describe_write(id))),
            },
            // Our header but unreadable: a mangled value.
            _ if value.starts_with(b"fl") && value.contains(&b'.') => {
                Some(format!("holds a mangled value ({} bytes)", value.len()))
            }
            // Written before this cell: not ours to judge.
            _ => None,
        };
        if let Some(p) = problem {
            bad += 1;
            if witnesses.len() < WITNESSES {
                witnesses.push(format!("key {key} {p}"));
            }
        }
    }
    CheckResult::counted(CheckerName::FinalState, checked, bad, witnesses)
}
