//! Synthetic results for the report's tests: for every shipped spec, full
//! and `--quick`, results that fill every section of the report (faults, an
//! unrecovered target, roles, checks with witnesses, error examples, an
//! under-sent open loop, plugin criteria), built from the spec's plan, its
//! comparisons and its crash-recovery matrix.
//!
//! The report reads only results.json, so its tests read these as committed
//! files in fixtures/results/; the test here checks that they are what the
//! runner builds today. After a change to the results model or to this
//! builder, write them anew with
//! `FAULTLINE_WRITE_FIXTURES=1 cargo test --release --bin faultline synthetic_results`.

use std::path::{Path, PathBuf};

use faultline_model::checks::{CheckResult, CheckStatus, LostWritesAround, Spread};
use faultline_model::faults::FaultRecord;
use faultline_model::probes::{ProbeOutput, ProbeStatus, ProbeWhen, SyscallCount};
use faultline_model::provenance::Binary;
use faultline_model::results::*;
use faultline_model::roles::{NoPrimarySpan, NonPrimaryReads, ReadRuleUsed, RoleChange};
use faultline_model::stats::*;

use crate::plan::{Cell, Plan, PlanOptions};
use crate::spec::{Load, Spec};

/// The shipped specs (specs/*.yaml; specs/ also holds their templates/).
pub fn shipped_specs() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs");
    let mut specs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    specs.sort();
    assert!(specs.len() >= 5, "{specs:?}");
    specs
}

/// One fixture: a shipped spec's synthetic results, full or `--quick`.
#[derive(serde::Serialize)]
struct Fixture {
    spec: String,
    quick: bool,
    results: String,
    /// The spec's own report template (relative to the repository), if any.
    template: Option<String>,
}

/// fixtures/results/ holds, for every shipped spec, the synthetic results
/// of its full and its `--quick` plan, and index.json lists them with the
/// spec's own template. They must be what [`results`] builds today.
#[test]
fn fixtures_hold_the_synthetic_results_of_every_shipped_spec() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = root.join("fixtures/results");
    let write = std::env::var_os("FAULTLINE_WRITE_FIXTURES").is_some();
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    let mut index = Vec::new();
    for path in shipped_specs() {
        let loaded = crate::spec::load(&path, &[], &crate::kinds::CATALOG).unwrap_or_else(|e| panic!("{e}"));
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        for quick in [false, true] {
            let plan = crate::plan::build(&loaded, &PlanOptions { quick, only: vec![] }).unwrap();
            let built = results(&loaded.spec, &plan);
            // A scenario with several variants has its ratios.
            let comparing = loaded.spec.scenarios.iter().any(|s| s.variants().len() > 1);
            assert_eq!(comparing, !built.comparisons.is_empty(), "{}", path.display());
            let text = serde_json::to_string_pretty(&built).unwrap() + "\n";
            // A quick plan that is the full one shares its file.
            let name = match files.last() {
                Some((last, full)) if quick && *full == text => last.file_name().unwrap().to_str().unwrap().into(),
                _ => {
                    let name = format!("synthetic-{stem}{}.json", if quick { "-quick" } else { "" });
                    files.push((dir.join(&name), text));
                    name
                }
            };
            index.push(Fixture {
                spec: format!("specs/{stem}.yaml"),
                quick,
                results: name,
                template: loaded.spec.report.template.as_ref().map(|t| format!("specs/{t}")),
            });
        }
    }
    files.push((dir.join("index.json"), serde_json::to_string_pretty(&index).unwrap() + "\n"));
    if write {
        std::fs::create_dir_all(&dir).unwrap();
        for (path, text) in &files {
            std::fs::write(path, text).unwrap();
        }
        return;
    }
    for (path, text) in &files {
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == *text,
            "{} is not what the runner builds: write the fixtures anew (FAULTLINE_WRITE_FIXTURES=1 cargo test --release --bin faultline synthetic_results) and review the diff",
            path.display()
        );
    }
}

/// A fixed host, so the fixtures do not depend on the machine that wrote them.
fn host() -> HostInfo {
    HostInfo {
        hostname: "bench-1".into(),
        os: "Debian GNU/Linux 13 (trixie)".into(),
        kernel: "6.12.0".into(),
        cpus: 8,
        cpu_model: "Example CPU @ 3.0GHz".into(),
        memory_gib: 31.3,
    }
}

pub fn results(spec: &Spec, plan: &Plan) -> Results {
    let cells: Vec<CellResult> = plan.cells.iter().enumerate().map(|(i, c)| cell(spec, c, i)).collect();
    let gates = spec
        .gates
        .keys()
        .map(|name| GateResult {
            name: name.clone(),
            expr: spec.gates[name].describe(),
            result: GateOutcome::Fail,
            evidence: "fails in 1 of 2 cells: p99(get) = 40ms in s/a/t#1 | with a pipe".into(),
            criteria: vec![Criterion {
                name: "automatic recovery | pipe".into(),
                evidence: "line one\nline two".into(),
                result: GateOutcome::Incomplete,
            }],
            informational: false,
            cells: vec![GateCell {
                cell: "s/p/t#1 | pipe".into(),
                result: GateOutcome::Fail,
                evidence: "p99(get) = 40ms".into(),
            }],
        })
        .collect();
    Results {
        schema_version: SCHEMA_VERSION,
        run: RunInfo {
            id: "r".into(),
            name: spec.name.clone(),
            description: String::new(),
            spec_path: "specs/x.yaml".into(),
            started: "then".into(),
            finished: "now".into(),
            seed: 1,
            params: Default::default(),
            quick: false,
            only: vec![],
            interrupted: false,
            faultline_version: "0".into(),
            faultline_commit: "0123abc".into(),
            host: host(),
            agents: vec![],
        },
        verdict: Verdict::Fail,
        verdict_reasons: vec!["gate `g` failed".into()],
        gates,
        targets: vec![TargetInfo {
            name: "kv".into(),
            kind: "redis".into(),
            provider: "process".into(),
            uri: "redis://127.0.0.1:1".into(),
            server: "redis 7.0.15".into(),
            instance: None,
            args: vec!["--save".into(), "a|b".into()],
            work_dir: None,
            binary: Some(Binary { path: "/usr/bin/redis-server".into(), sha256: "0123456789abcdef0123".into() }),
            image: None,
            fault_filesystem: false,
            fault_filesystem_caching: None,
            probes: vec![],
        }],
        comparisons: faultline_judge::comparison::compare(spec, &cells),
        errors: vec!["a target did not come up".into()],
        manifest: Default::default(),
        crash_recovery: faultline_check::durability::matrix(&cells),
        cells,
    }
}

fn cell(spec: &Spec, c: &Cell, index: usize) -> CellResult {
    let scenario = spec.scenarios.iter().find(|s| s.name == c.scenario).unwrap();
    let latency = Some(LatencyStats { p50: 0.1, p95: 0.2, p99: 0.3, p999: 0.4, max: 5.0, mean: 0.15 });
    let op = OpStats {
        ok: 1000,
        failed: 3,
        errors: ErrorCounts { server: 3, ..Default::default() },
        over_deadline: 0,
        throughput: 500.0,
        latency_ms: latency,
        max_any_ms: 5.0,
    };
    let open = matches!(spec.profiles[&c.profile].load(), Load::Open(_));
    // A cell that did not run has no faults either.
    let ran = index % 5 != 4;
    let faults: Vec<FaultRecord> = scenario
        .faults
        .iter()
        .filter(|_| ran)
        .map(|f| FaultRecord {
            hit: vec!["kv-0".into()],
            confirmed_s: Some(1.01),
            evidence: "gone".into(),
            error: Some("heal failed | twice\nsecond line".into()),
            lost_writes: Some(LostWritesAround {
                lost: Spread { count: 5, first_s: Some(1.0), last_s: Some(2.5) },
                demoted_primaries: vec![],
                outside_demoted: Spread { count: 5, first_s: Some(1.0), last_s: Some(2.5) },
            }),
            ..FaultRecord::requested(&f.name, "kill", "kv.primary", 1.0)
        })
        .collect();
    let faults_empty = faults.is_empty();
    let stats = CellStats {
        ok: 1000,
        failed: 3,
        throughput: 500.0,
        errors: op.errors,
        over_deadline: 0,
        status_classes: Default::default(),
        per_op: [("get".to_string(), op.clone()), ("set".to_string(), op)].into_iter().collect(),
        timeline: (0..3)
            .map(|t| TimelinePoint {
                t: t as f64,
                ok: 10 * t,
                failed: 1,
                mean_ms: 0.1,
                p99_ms: Some(0.5),
                max_ms: 1.0,
                target_rate: None,
            })
            .collect(),
        timeline_step_s: 1.0,
        schedule_lag_ms: open.then_some(latency).flatten(),
        open_loop: open.then_some(OpenLoopStats {
            rate: 1000.0,
            min_sent: 0.99,
            due: 3000,
            sent: 1003,
            unsent: 1997,
            unsent_late: 0,
            achieved_rate: 501.5,
        }),
        error_labels: vec![ErrorLabel {
            label: "server LOADING".into(),
            count: 3,
            examples: vec!["LOADING Redis is loading | the dataset\nin memory".into()],
        }],
        fault_impact: faults
            .iter()
            .enumerate()
            .map(|(k, f)| FaultImpact {
                fault: f.name.clone(),
                ops: 10,
                failed: 3,
                max_latency_ms: 5.0,
                denied_window_s: (k % 2 == 1).then_some(0.5),
                denied_at_least_s: (k % 2 == 0).then_some(1.5),
                not_recovered: k % 2 == 0,
                first_success_s: (k % 2 == 1).then_some(0.6),
                throughput_before: 500.0,
                recovered_s: None,
                per_op: ["get", "set"]
                    .into_iter()
                    .map(|op| {
                        let own = FaultImpact {
                            fault: f.name.clone(),
                            ops: 5,
                            failed: if op == "set" { 3 } else { 0 },
                            max_latency_ms: 5.0,
                            denied_window_s: (op == "set").then_some(0.5),
                            denied_at_least_s: None,
                            not_recovered: false,
                            first_success_s: Some(0.6),
                            throughput_before: 250.0,
                            recovered_s: Some(1.0),
                            per_op: Default::default(),
                        };
                        (op.to_string(), own)
                    })
                    .collect(),
            })
            .collect(),
        window_latency: vec![],
        stages: vec![],
        client_cpu: Some(client_cpu(0.97)),
        // A fan-out workload's books: one paused subscriber that dropped some.
        fanout: spec.workloads[&c.workload].fanout.as_ref().map(|f| {
            let per_subscriber: Vec<SubscriberStats> = (0..f.subscribers)
                .map(|i| SubscriberStats {
                    subscriber: i,
                    channels: vec![i % f.channels],
                    published: 1000,
                    received: if i == 0 { 970 } else { 1000 },
                    drops: if i == 0 { 30 } else { 0 },
                    duplicates: 0,
                    reordered: 0,
                    reconnects: u64::from(i == 0),
                    paused: i == 0,
                })
                .collect();
            FanoutStats {
                channels: f.channels,
                subscribers: f.subscribers,
                published: 1000 * u64::from(f.channels),
                expected: 1000 * u64::from(f.subscribers),
                delivered: 1000 * u64::from(f.subscribers) - 30,
                delivered_per_s: (1000.0 * f64::from(f.subscribers) - 30.0) / 2.0,
                drops: 30,
                duplicates: 0,
                reordered: 0,
                receivers: 1000 * u64::from(f.subscribers) - 20,
                reconnects: 1,
                drain_ms: 12.5,
                drained: true,
                latency_ms: latency,
                per_subscriber,
            }
        }),
        agents: vec![],
        served: None,
        host: None,
    };
    let roles = match faults.is_empty() {
        true => vec![],
        false => vec![
            RoleChange { at_s: 0.0, previous_sample_s: 0.0, member: "kv-0".into(), role: "primary".into() },
            RoleChange { at_s: 0.0, previous_sample_s: 0.0, member: "kv-1".into(), role: "replica".into() },
        ],
    };
    CellResult {
        scenario: c.scenario.clone(),
        profile: c.profile.clone(),
        shape: spec.profiles[&c.profile].shape(),
        target: c.target.clone(),
        workload: c.workload.clone(),
        variant: c.variant.clone(),
        repeat: c.repeat,
        // Every fifth cell did not run: the report says why.
        status: if index % 5 == 4 { CellStatus::Failed } else { CellStatus::Completed },
        error: (index % 5 == 4).then(|| "cannot open 3 connections | refused\nretry".into()),
        measured_s: 3.0,
        stats: (index % 5 != 4).then_some(stats),
        checks: spec
            .checkers
            .iter()
            .map(|k| CheckResult {
                checker: k.as_str().into(),
                status: CheckStatus::Violated,
                checked: 10,
                judged: faultline_check::checker::named(k.as_str()).expect("a registered checker").judges().into(),
                violations: 2,
                witnesses: vec!["key 1 | lost at 3 ms".into(), "key 2 lost\nat 4 ms".into()],
                note: String::new(),
                index: None,
            })
            .collect(),
        faults,
        roles,
        non_primary_reads: (!faults_empty).then(|| NonPrimaryReads {
            read_concern: "linearizable".into(),
            requires_primary: true,
            rule: ReadRuleUsed::Mixed,
            judged: 900,
            attributed: 850,
            count: 2,
            demoted: 1,
            spans: vec![NoPrimarySpan { from_s: 1.25, to_s: 2.5, roles: "kv-0: replica | x".into() }],
            examples: vec!["get answered 1.300 s into the window by kv-0 | pipe\nline".into()],
        }),
        matrix: c.matrix().clone(),
        probes: vec![
            ProbeOutput {
                name: "strace".into(),
                when: ProbeWhen::Window,
                target: c.instance.clone(),
                command: "strace -c -f -p 1".into(),
                status: ProbeStatus::Ok,
                note: String::new(),
                file: "probes/001-a-strace-window.txt".into(),
                output: String::new(),
                syscalls: vec![SyscallCount { syscall: "futex".into(), calls: 149_718, errors: 0 }],
            },
            ProbeOutput {
                name: "perf | x".into(),
                when: ProbeWhen::Before,
                target: c.instance.clone(),
                command: "perf".into(),
                status: ProbeStatus::Unavailable,
                note: "command not found:\nsh: perf".into(),
                file: String::new(),
                output: String::new(),
                syscalls: vec![],
            },
        ],
        frozen: vec![],
        capacity: scenario.capacity.as_ref().map(|c| capacity_search(&c.slo, index)),
    }
}

fn client_cpu(busiest_share: f64) -> ClientCpu {
    ClientCpu { cores: 1.4, host_cores: 2, busiest_thread: "load-thread-0".into(), busiest_share }
}

/// A search that grew, failed, bisected and confirmed; every other one
/// stopped client-bound, with a step whose words hold a pipe and a newline.
fn capacity_search(slo: &str, index: usize) -> faultline_model::capacity::CapacitySearch {
    use faultline_model::capacity::{Bound, CapacitySearch, CapacityStep, Phase, Repeats, SloLimit};
    let step = |rate: f64, phase: Phase, met: bool, p99: f64| CapacityStep {
        rate,
        phase,
        achieved_rate: rate.min(60_000.0),
        throughput: rate.min(59_000.0),
        p50_ms: Some(p99 / 4.0),
        p99_ms: Some(p99),
        error_rate: if met { 0.0 } else { 0.02 },
        unsent: if met { 0 } else { 1200 },
        client_cpu: Some(client_cpu(0.5)),
        met,
        client_bound: false,
        noise: false,
        host: None,
        disturbed: None,
        why: if met { "p99(set) 0.4ms < 1ms".into() } else { "p99(set) 9ms < 1ms | no\nmore".into() },
    };
    let client_bound = index % 2 == 1;
    let mut steps = vec![
        step(10_000.0, Phase::Grow, true, 0.3),
        step(20_000.0, Phase::Grow, true, 0.4),
        step(40_000.0, Phase::Grow, !client_bound, 0.6),
    ];
    let bound = match client_bound {
        true => {
            let last = steps.last_mut().expect("three steps");
            last.client_bound = true;
            last.client_cpu = Some(client_cpu(0.99));
            Bound::Client
        }
        false => {
            // A failure in a burst of other work, then again: taken.
            let mut burst = step(80_000.0, Phase::Grow, false, 9.0);
            burst.host = Some(faultline_model::stats::HostLoad {
                host_cores: 2,
                busy_cores: 1.9,
                ours_cores: 1.0,
                others_cores: 0.9,
                steal_cores: 0.0,
                run_queue: 3.5,
            });
            burst.disturbed = Some("the host was busy: other processes took 0.90 of its 2 cores".into());
            steps.push(burst);
            steps.push(step(80_000.0, Phase::Retry, false, 9.0));
            steps.push(step(56_600.0, Phase::Bisect, true, 0.8));
            steps.push(step(56_600.0, Phase::Confirm, true, 0.8));
            Bound::Target
        }
    };
    CapacitySearch {
        slo: slo.into(),
        rate_from: 10_000.0,
        rate_to: 200_000.0,
        slo_limits: vec![SloLimit { metric: "p99(set)".into(), ms: 1.0 }],
        capacity: Some(if client_bound { 20_000.0 } else { 56_600.0 }),
        failed_at: Some(if client_bound { 40_000.0 } else { 80_000.0 }),
        bound,
        steps,
        tolerance: 0.15,
        non_monotone: None,
        // Two repeats that disagree: the capacity is not one number.
        repeats: (!client_bound).then(|| Repeats {
            count: 2,
            found: 2,
            median: Some(48_300.0),
            min: Some(40_000.0),
            max: Some(56_600.0),
            spread: Some(0.17),
            repeatable: false,
            why: "its 2 repeats found 40,000 to 56,600/s (median 48,300/s, ±17%), wider than the ±15% tolerance".into(),
        }),
    }
}
