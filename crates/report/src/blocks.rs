//! The parts of the report rendered in Rust and handed to every template as
//! text: the crash-recovery section ([`crash_recovery`]), the probes section
//! ([`probes`]), the provenance table ([`provenance`]), and the sentence
//! placing each fault's lost writes ([`lost_writes`]). Each reads results
//! only; the runner and the check crate produce what they read.

use std::collections::{BTreeSet, HashMap};

use faultline_model::checks::Spread;
use faultline_model::faults::FaultRecord;
use faultline_model::format::{one_line, thousands};
use faultline_model::labels::{matrix_suffix, point_label};
use faultline_model::probes::{ProbeStatus, SyscallCount};
use faultline_model::recovery::RecoveryRow;
use faultline_model::results::{CellResult, Results, TargetInfo};

/// The report's section: one line per row, with examples of lost writes.
pub fn crash_recovery(rows: &[RecoveryRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "## Crash recovery\n\nEach restart killed the server (`crash`: SIGKILL), shut it down (`clean`: SIGTERM) or cut its power (`power-loss`: SIGKILL, and every write its disk had not fsynced thrown away) and started it again on its own data; then every write acknowledged in the cell was looked for.\n\n| scenario | matrix | variant | restart | result |\n|---|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.scenario,
            point_label(&r.matrix),
            r.variant,
            r.restart,
            one_line(&r.sentence())
        ));
    }
    let examples: Vec<String> = rows
        .iter()
        .flat_map(|r| {
            let point = matrix_suffix(&r.matrix);
            r.examples.iter().map(move |e| format!("- {}{point} {}: {}", r.scenario, r.restart, one_line(e)))
        })
        .chain(rows.iter().flat_map(|r| r.failures.iter().map(|f| format!("- restart failed: {}", one_line(f)))))
        .collect();
    if !examples.is_empty() {
        out.push('\n');
        out.push_str(&examples.join("\n"));
        out.push('\n');
    }
    out
}

/// The report's section: `strace -c` counts side by side per variant (the
/// mean per cell over its repeats), what the other probes saved, and every
/// probe that could not run, with why.
pub fn probes(cells: &[CellResult], targets: &[TargetInfo]) -> String {
    // Scenario, matrix point (as its label) and probe.
    type Key = (String, String, String);
    let mut tables: Vec<(Key, Vec<String>)> = Vec::new();
    let mut counts: HashMap<(Key, String), (u64, Vec<SyscallCount>)> = Default::default();
    let mut saved: indexmap::IndexMap<String, usize> = indexmap::IndexMap::new();
    let mut missing: BTreeSet<String> = BTreeSet::new();
    let all = cells.iter().flat_map(|c| c.probes.iter().map(move |p| (Some(c), p)));
    for (cell, p) in all.chain(targets.iter().flat_map(|t| t.probes.iter().map(|p| (None, p)))) {
        if p.status != ProbeStatus::Ok {
            missing.insert(one_line(&format!(
                "- `{}` ({}) on {}: {:?} — {}",
                p.name,
                p.when.as_str(),
                p.target,
                p.status,
                p.note
            )));
            continue;
        }
        *saved.entry(format!("`{}` ({})", p.name, p.when.as_str())).or_default() += 1;
        let (Some(cell), false) = (cell, p.syscalls.is_empty()) else { continue };
        let key: Key = (cell.scenario.clone(), matrix_suffix(&cell.matrix), p.name.clone());
        match tables.iter_mut().find(|(k, _)| *k == key) {
            Some((_, variants)) if !variants.contains(&cell.variant().to_string()) => {
                variants.push(cell.variant().into())
            }
            Some(_) => {}
            None => tables.push((key.clone(), vec![cell.variant().into()])),
        }
        let entry = counts.entry((key, cell.variant().to_string())).or_default();
        entry.0 += 1;
        for s in &p.syscalls {
            match entry.1.iter_mut().find(|e| e.syscall == s.syscall) {
                Some(e) => e.calls += s.calls,
                None => entry.1.push(s.clone()),
            }
        }
    }
    if tables.is_empty() && saved.is_empty() && missing.is_empty() {
        return String::new();
    }
    let mut out = String::from("## Probes\n");
    for (key, variants) in &tables {
        let (scenario, matrix, probe) = key;
        out.push_str(&format!(
            "\n### `{probe}`: {scenario}{matrix}\n\nSyscalls per cell (mean over repeats), the most frequent first.\n\n| syscall |"
        ));
        for v in variants {
            out.push_str(&format!(" {v} |"));
        }
        out.push_str(&format!("\n|---|{}\n", "---:|".repeat(variants.len())));
        let mean = |v: &str, syscall: &str| {
            let (n, rows) = &counts[&(key.clone(), v.to_string())];
            rows.iter().find(|r| r.syscall == syscall).map(|r| r.calls as f64 / *n as f64)
        };
        let mut syscalls: Vec<(String, f64)> = Vec::new();
        for v in variants {
            for r in &counts[&(key.clone(), v.clone())].1 {
                let top = variants.iter().filter_map(|v| mean(v, &r.syscall)).fold(0.0, f64::max);
                if !syscalls.iter().any(|(s, _)| *s == r.syscall) {
                    syscalls.push((r.syscall.clone(), top));
                }
            }
        }
        syscalls.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (syscall, _) in syscalls.iter().take(10) {
            out.push_str(&format!("| {syscall} |"));
            for v in variants {
                let shown = mean(v, syscall).map(|m| thousands(m.round() as u64)).unwrap_or_else(|| "0".into());
                out.push_str(&format!(" {shown} |"));
            }
            out.push('\n');
        }
    }
    if !saved.is_empty() {
        let each: Vec<String> = saved.iter().map(|(k, n)| format!("{k} {n}x")).collect();
        out.push_str(&format!("\nOutputs saved under `probes/`: {}.\n", each.join(", ")));
    }
    if !missing.is_empty() {
        out.push_str("\nNot available or failed:\n\n");
        out.push_str(&missing.into_iter().collect::<Vec<_>>().join("\n"));
        out.push('\n');
    }
    out
}

/// The report's provenance table, the same in every shipped template: the
/// run, the spec, each target (the server as it described itself, binary
/// and digest or image, arguments, start probes), isolation, plugins, the
/// host and faultline itself.
pub fn provenance(results: &Results) -> String {
    let run = &results.run;
    let mut out = String::from("| Item | Value |\n|---|---|\n");
    out.push_str(&format!(
        "| Run | `{}`, {} → {}{} |\n",
        run.id,
        run.started,
        run.finished,
        if run.interrupted { " (interrupted)" } else { "" }
    ));
    let mut spec = format!("`{}`, seed {}", run.spec_path, run.seed);
    for (k, v) in &run.params {
        let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
        spec.push_str(&format!(", {k}={v}"));
    }
    if run.quick {
        spec.push_str(", --quick");
    }
    if !run.only.is_empty() {
        spec.push_str(&format!(", --only {}", run.only.join(",")));
    }
    out.push_str(&format!("| Spec | {} |\n", one_line(&spec)));
    for t in &results.targets {
        let mut row = format!("{} ({} via {}, {})", t.server, t.kind, t.provider, t.uri);
        if let Some(b) = &t.binary {
            row.push_str(&format!("; `{}` sha256 {}", b.path, b.sha256.get(..16).unwrap_or(&b.sha256)));
        }
        if let Some(image) = &t.image {
            row.push_str(&format!("; image `{image}`"));
        }
        if t.fault_filesystem {
            let caching = match t.fault_filesystem_caching {
                Some(faultline_model::faults::Caching::WriteBack) => " write-back",
                Some(faultline_model::faults::Caching::WriteThrough) => " write-through",
                None => "",
            };
            row.push_str(&format!("; data on faultline's fault filesystem (FUSE{caching}, for disk faults)"));
        }
        if !t.args.is_empty() {
            row.push_str(&format!("; args `{}`", t.args.join(" ")));
        } else if t.binary.is_some() {
            row.push_str("; no args beyond faultline's own (port, data directory)");
        }
        for p in &t.probes {
            match p.status {
                ProbeStatus::Ok => row.push_str(&format!("; {}: `{}`", p.name, p.output.trim())),
                _ => row.push_str(&format!("; {}: {:?} ({})", p.name, p.status, p.note)),
            }
        }
        out.push_str(&format!("| Target `{}` | {} |\n", t.instance.as_deref().unwrap_or(&t.name), one_line(&row)));
    }
    for (scenario, isolation) in &results.manifest.isolation {
        let how = match isolation.as_str() {
            "stop" => "the other targets frozen (SIGSTOP) during each cell",
            "own-cells" => "each target running only for its own cells",
            _ => "the other targets up and idle during each cell",
        };
        out.push_str(&format!("| Isolation, `{scenario}` | {isolation}: {how} |\n"));
    }
    for p in &results.manifest.plugins {
        out.push_str(&format!("| Plugin `{}` | sha256 {} |\n", p.path, p.sha256));
    }
    let h = &run.host;
    out.push_str(&format!(
        "| Host | {}: {} × {}, {} GiB, {}, Linux {} |\n",
        h.hostname, h.cpus, h.cpu_model, h.memory_gib, h.os, h.kernel
    ));
    let commit = match run.faultline_commit.is_empty() {
        true => String::new(),
        false => format!(", commit {}", run.faultline_commit),
    };
    out.push_str(&format!("| faultline | {}{commit} |\n", run.faultline_version));
    for a in &run.agents {
        let clock = match a.same_clock {
            true => format!("this host's clock (round trip {:.0} µs)", a.round_trip_us),
            false => format!(
                "clock {:+.0} µs ± {:.0} µs (round trip {:.0} µs)",
                a.clock_offset_us, a.clock_uncertainty_us, a.round_trip_us
            ),
        };
        out.push_str(&format!(
            "| Agent `{}` | {} on {} (pid {}, {} cores), faultline {} sha256 {}; {clock}; {} |\n",
            a.name,
            a.launcher,
            a.host,
            a.pid,
            a.cores,
            a.faultline_version,
            a.binary_sha256.get(..16).unwrap_or(&a.binary_sha256),
            a.share
        ));
    }
    out
}

/// The report's sentence for one fault, e.g. "531,322 lost writes, all
/// acknowledged between 11.02 s and 14.87 s; kv-0 was a demoted primary still
/// answering as primary (10.75–14.90 s; kv-2 primary since 11.00 s): 600,112
/// writes acknowledged then (by any member), 531,322 of them lost (…)". None
/// when there is nothing to place.
pub fn lost_writes(fault: &FaultRecord) -> Option<String> {
    let (around, requested_s) = (fault.lost_writes.as_ref()?, fault.requested_s);
    if around.lost.count == 0 && around.demoted_primaries.is_empty() {
        return None;
    }
    let between = |s: &Spread| match (s.first_s, s.last_s) {
        (Some(f), Some(l)) => format!("between {f:.2} s and {l:.2} s"),
        _ => String::new(),
    };
    let mut parts = Vec::new();
    let lost = &around.lost;
    let inside = lost.count - around.outside_demoted.count;
    parts.push(match (lost.count, inside, around.demoted_primaries.is_empty()) {
        (0, _, _) => "no lost writes".to_string(),
        (n, _, true) => format!(
            "{} lost writes, acknowledged {}, with no demoted primary in the role timeline",
            thousands(n),
            between(lost)
        ),
        (n, i, false) if i == n => format!("{} lost writes, all acknowledged {}", thousands(n), between(lost)),
        (n, i, false) => format!(
            "{} lost writes, {} of them acknowledged outside every demoted-primary span ({}; the fault was requested at {:.2} s), {} inside",
            thousands(n),
            thousands(n - i),
            between(&around.outside_demoted),
            requested_s,
            thousands(i)
        ),
    });
    for d in &around.demoted_primaries {
        let s = &d.span;
        parts.push(format!(
            "{} was a demoted primary still answering as primary ({:.2}–{:.2} s{}; {} primary since {:.2} s): {} writes acknowledged then (by any member), {} of them lost{}",
            s.member,
            s.from_s,
            s.to_s,
            if s.open_at_end { " and on past the window's end" } else { "" },
            s.successor,
            s.seen_s,
            thousands(d.acked_writes),
            thousands(d.lost.count),
            if d.lost.count > 0 { format!(" (acknowledged {})", between(&d.lost)) } else { String::new() }
        ));
    }
    Some(parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use faultline_model::checks::{DemotedWrites, LostWritesAround};
    use faultline_model::roles::DemotedPrimary;

    fn spread(count: u64, first_s: f64, last_s: f64) -> Spread {
        Spread { count, first_s: Some(first_s), last_s: Some(last_s) }
    }

    /// What the check crate's `lost_write_times::place` gives a fault.
    fn fault(requested_s: f64, around: LostWritesAround) -> FaultRecord {
        FaultRecord { lost_writes: Some(around), ..FaultRecord::requested("f", "failover", "kv.primary", requested_s) }
    }

    #[test]
    fn lost_writes_are_said_against_the_demoted_primary_spans() {
        let span = DemotedPrimary {
            member: "kv-0".into(),
            successor: "kv-2".into(),
            from_s: 10.75,
            seen_s: 11.0,
            to_s: 14.9,
            open_at_end: false,
        };
        let demoted = |lost: Spread| vec![DemotedWrites { span: span.clone(), acked_writes: 900, lost }];
        let text = lost_writes(&fault(
            10.0,
            LostWritesAround {
                lost: spread(4, 11.02, 16.0),
                demoted_primaries: demoted(spread(3, 11.02, 14.87)),
                outside_demoted: spread(1, 16.0, 16.0),
            },
        ))
        .unwrap();
        assert!(
            text.starts_with("4 lost writes, 1 of them acknowledged outside every demoted-primary span (between 16.00 s and 16.00 s; the fault was requested at 10.00 s), 3 inside"),
            "{text}"
        );
        assert!(text.contains("kv-0 was a demoted primary still answering as primary (10.75–14.90 s; kv-2 primary since 11.00 s): 900 writes acknowledged then (by any member), 3 of them lost (acknowledged between 11.02 s and 14.87 s)"), "{text}");

        // All inside: said so; nothing lost and no span: nothing to say.
        let text = lost_writes(&fault(
            10.0,
            LostWritesAround {
                lost: spread(2, 11.02, 14.87),
                demoted_primaries: demoted(spread(2, 11.02, 14.87)),
                outside_demoted: Spread::default(),
            },
        ))
        .unwrap();
        assert!(text.starts_with("2 lost writes, all acknowledged between 11.02 s and 14.87 s; kv-0 was"), "{text}");
        assert_eq!(lost_writes(&fault(10.0, LostWritesAround::default())), None);
        assert_eq!(lost_writes(&FaultRecord::requested("f", "kill", "kv", 1.0)), None);
    }
}
