//! `faultline history export`: a recorded cell as a Jepsen-style EDN event
//! log or a Porcupine-style JSON operation list, for outside tools.
//!
//! Jepsen processes are sequential, but a faultline connection keeps many ops
//! in flight, so ops get process numbers anew: the smallest process whose
//! previous op has ended. Export holds the cell's ops in memory (it is an
//! offline tool); the run itself never does.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::io::Write;
use std::path::Path;

use super::{Merged, Observed, OpRecord, Outcome};
use faultline_model::ops::OpKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Jepsen EDN events, one map per line (what `faultline check --model kv` reads).
    Edn,
    /// Porcupine-style JSON: an array of {client_id, input, call, output, return}.
    Json,
}

struct Exported {
    process: u64,
    record: OpRecord,
}

/// Reads a cell's history and assigns sequential process numbers. Failed ops
/// and unanswered reads are kept for EDN (as `:fail` / `:info`) but they
/// constrain nothing.
fn load(dir: &Path) -> anyhow::Result<Vec<Exported>> {
    let mut records = Vec::new();
    let mut merged = Merged::open(dir)?;
    while let Some(r) = merged.next_record()? {
        if matches!(r.kind, OpKind::Get | OpKind::Set) {
            records.push(r);
        }
    }
    records.sort_by_key(|r| (r.start, r.end));
    // Processes busy until (end, process); free ones reused smallest first.
    let mut busy: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::new();
    let mut free: BTreeSet<u64> = BTreeSet::new();
    let mut next = 0;
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        while let Some(Reverse((end, p))) = busy.peek().copied() {
            if end >= record.start {
                break;
            }
            busy.pop();
            free.insert(p);
        }
        let process = free.pop_first().unwrap_or_else(|| {
            next += 1;
            next - 1
        });
        // An unknown op never ends: its process is never reused.
        let busy_until = if record.outcome == Outcome::Unknown { u64::MAX } else { record.end };
        busy.push(Reverse((busy_until, process)));
        out.push(Exported { process, record });
    }
    Ok(out)
}

fn value_text(observed: Observed) -> Option<String> {
    match observed {
        Observed::Write(id) => Some(format!("{}.{}", id.writer, id.seq)),
        _ => None,
    }
}

fn written_text(r: &OpRecord) -> Option<String> {
    r.written.map(|id| format!("{}.{}", id.writer, id.seq))
}

pub fn export(dir: &Path, format: Format, out: &mut dyn Write) -> anyhow::Result<usize> {
    let ops = load(dir)?;
    match format {
        Format::Edn => write_edn(&ops, out)?,
        Format::Json => write_json(&ops, out)?,
    }
    Ok(ops.len())
}

fn edn_string(s: &Option<String>) -> String {
    match s {
        Some(v) => format!("\"{v}\""),
        None => "nil".into(),
    }
}

fn write_edn(ops: &[Exported], out: &mut dyn Write) -> anyhow::Result<()> {
    // Events in time order; at equal times completions go first, so an op
    // that ends when another starts is not seen as concurrent with it.
    let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(ops.len() * 2);
    for (i, op) in ops.iter().enumerate() {
        events.push((op.record.start, 1, i));
        if op.record.outcome != Outcome::Unknown {
            events.push((op.record.end, 0, i));
        }
    }
    events.sort_unstable();
    for (_, is_invoke, i) in events {
        let Exported { process, record: r } = &ops[i];
        let f = if r.kind == OpKind::Set { "put" } else { "get" };
        let key = r.key;
        let (kind, value) = match (is_invoke == 1, r.kind, r.outcome) {
            (true, OpKind::Set, _) => ("invoke", written_text(r)),
            (true, _, _) => ("invoke", None),
            (false, OpKind::Set, Outcome::Ok) => ("ok", written_text(r)),
            (false, _, Outcome::Ok) => ("ok", value_text(r.observed)),
            (false, _, _) => ("fail", written_text(r)),
        };
        writeln!(out, "{{:process {process}, :type :{kind}, :f :{f}, :key \"{key}\", :value {}}}", edn_string(&value))?;
    }
    // Ops of unknown outcome: Jepsen's `:info`, at the end of the log.
    for Exported { process, record: r } in ops.iter().filter(|o| o.record.outcome == Outcome::Unknown) {
        let f = if r.kind == OpKind::Set { "put" } else { "get" };
        writeln!(
            out,
            "{{:process {process}, :type :info, :f :{f}, :key \"{}\", :value {}}}",
            r.key,
            edn_string(&written_text(r))
        )?;
    }
    Ok(())
}

fn write_json(ops: &[Exported], out: &mut dyn Write) -> anyhow::Result<()> {
    let list: Vec<serde_json::Value> = ops
        .iter()
        .filter(|o| o.record.outcome != Outcome::Fail)
        .map(|Exported { process, record: r }| {
            let (input, output) = match r.kind {
                OpKind::Set => (
                    serde_json::json!({"op": "put", "key": r.key.to_string(), "value": written_text(r)}),
                    serde_json::json!({"ok": r.outcome == Outcome::Ok}),
                ),
                _ => (
                    serde_json::json!({"op": "get", "key": r.key.to_string()}),
                    serde_json::json!({"value": value_text(r.observed).unwrap_or_default()}),
                ),
            };
            serde_json::json!({
                "client_id": process,
                "input": input,
                "call": r.start,
                "output": if r.outcome == Outcome::Ok { output } else { serde_json::Value::Null },
                // Unknown outcome: it may take effect at any time after the call.
                "return": if r.outcome == Outcome::Ok { serde_json::json!(r.end) } else { serde_json::Value::Null },
            })
        })
        .collect();
    serde_json::to_writer(&mut *out, &list)?;
    writeln!(out)?;
    Ok(())
}
