//! Reports for people and CI from real runs against redis-server:
//! `faultline compare` catches a server made slower (much larger values)
//! and passes a run against itself; `--junit` and `$GITHUB_STEP_SUMMARY`
//! say what the gates said; `report --into` rewrites only its section of
//! a document, idempotently, and refuses bad input leaving it untouched.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::*;

/// Two redis-servers compared on SETs of `${value}`-byte values, three
/// alternated repeats: a ratio gate that holds, one that cannot.
const SPEC: &str = r#"name: reports-e2e
params:
  value: 32B
  duration: 1s
targets:
  base: {kind: redis, provider: process, args: ["--save", "", "--appendonly", "no"]}
  cand: {kind: redis, provider: process, args: ["--save", "", "--appendonly", "no"]}
workloads:
  w: {ops: {set: 1}, keys: {count: 1000}, value_size: "${value}"}
profiles:
  p: {closed: 2x8}
timing: {warmup: 0s, duration: "${duration}", repeats: 3, deadline: 5s}
scenarios:
  - {name: s, target: [base, cand], workload: w, profiles: [p]}
gates:
  no-errors: errors == 0
  close-enough: ratio(throughput, cand/base) >= 0.2
  impossible: ratio_low(throughput, cand/base) >= 10
"#;

fn compare(a: &Path, b: &Path, extra: &[&str]) -> Output {
    faultline().arg("compare").arg(a).arg(b).args(extra).output().unwrap()
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

/// A copy of a run directory whose results.json `edit` changed.
fn edited_copy(run: &Path, into: &Path, edit: impl Fn(&mut serde_json::Value)) -> PathBuf {
    let dir = into.join(run.file_name().unwrap());
    std::fs::create_dir_all(&dir).unwrap();
    let mut results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("results.json")).unwrap()).unwrap();
    edit(&mut results);
    std::fs::write(dir.join("results.json"), serde_json::to_string(&results).unwrap()).unwrap();
    dir
}

#[test]
fn compare_catches_a_slower_server_and_ci_outputs_carry_the_gates() {
    let _load = shared();
    let (_d, spec) = spec_file(SPEC);
    let ci = tempfile::tempdir().unwrap();
    let junit = ci.path().join("junit.xml");
    let summary = ci.path().join("summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();

    let out = tempfile::tempdir().unwrap();
    let output = faultline()
        .arg("run")
        .arg(&spec)
        .arg("--junit")
        .arg(&junit)
        .arg("--out")
        .arg(out.path())
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .unwrap();
    let fast = run_dir(out.path()).expect("a run directory");
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));

    // The run's own ratios: two identical servers, three repeats each.
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fast.join("results.json")).unwrap()).unwrap();
    let c = &results["comparisons"][0];
    assert_eq!(
        (c["baseline"].as_str(), c["target"].as_str(), c["repeats"].as_u64()),
        (Some("base"), Some("cand"), Some(3))
    );
    let (low, high) =
        (c["throughput"]["interval"]["low"].as_f64().unwrap(), c["throughput"]["interval"]["high"].as_f64().unwrap());
    let value = c["throughput"]["value"].as_f64().unwrap();
    assert!(low <= value && value <= high && low > 0.2, "{c}");
    assert!(c["baseline_stats"]["p99_ms"].as_f64().unwrap() > 0.0, "{c}");
    let report = std::fs::read_to_string(fast.join("report.md")).unwrap();
    assert!(report.contains("| s/p | cand | base |"), "{report}");
    for chart in ["charts/timeline-s-p.svg", "charts/percentiles-s-p.svg", "charts/ratios-s.svg"] {
        assert!(report.contains(&format!("]({chart})")), "{chart} not linked:\n{report}");
        let svg = std::fs::read_to_string(fast.join(chart)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{chart}: {}", &svg[..svg.len().min(200)]);
    }
    // The timeline's latency is each second's p99, which results.json carries.
    let timeline = std::fs::read_to_string(fast.join("charts/timeline-s-p.svg")).unwrap();
    assert!(timeline.contains("p99"), "the latency panel names its p99");
    let seconds = results["cells"][0]["stats"]["timeline"].as_array().unwrap();
    assert!(seconds.iter().all(|s| s["ok"] == 0 || s["p99_ms"].as_f64().is_some_and(|p| p > 0.0)), "{seconds:?}");
    // Each variant's percentiles, p50 to max, in one chart per group: a
    // colour per variant, named once for its repeats.
    let percentiles = std::fs::read_to_string(fast.join("charts/percentiles-s-p.svg")).unwrap();
    assert!(percentiles.contains("p99.9"), "{percentiles}");
    assert!(percentiles.contains("cand (3 repeats)") && percentiles.contains("base (3 repeats)"), "{percentiles}");
    assert!(!percentiles.contains("cand #1"), "{percentiles}");

    // JUnit: one testcase per gate and cell (per group for ratio gates).
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(
        xml.contains(r#"<testsuite name="gate no-errors" tests="6" failures="0" errors="0" skipped="0">"#),
        "{xml}"
    );
    assert!(xml.contains(r#"<testcase classname="reports-e2e.gate.no-errors" name="s/p/cand#3"/>"#), "{xml}");
    assert!(xml.contains(r#"<testcase classname="reports-e2e.gate.close-enough" name="s/p"/>"#), "{xml}");
    assert!(xml.contains(r#"<testsuite name="gate impossible" tests="1" failures="1""#), "{xml}");
    assert!(xml.contains(r#"<failure message="ratio_low(throughput, cand/base) = "#), "{xml}");
    assert!(xml.contains(r#"<testsuite name="cells" tests="6" failures="0" errors="0" skipped="0">"#), "{xml}");
    assert!(xml.contains(r#"<testcase classname="reports-e2e.run" name="verdict">"#), "{xml}");

    // The step summary is appended after what earlier steps wrote.
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.starts_with("earlier step\n### faultline reports-e2e: FAIL\n"), "{md}");
    assert!(md.contains("| impossible | **FAIL** |") && md.contains("| close-enough | PASS |"), "{md}");
    assert!(md.contains("| s/p | cand | base |") && md.contains("report.md`"), "{md}");

    // The same spec with values 32,768 times larger: every cell slower, by
    // far more than a noisy (CPU-stolen) machine moves a 1 s repeat.
    let slow_run = run(&spec, &["--set", "value=1MiB"]);
    let slow = slow_run.dir.clone().expect("a run directory");
    let o = compare(&fast, &slow, &["--json", ci.path().join("cmp.json").to_str().unwrap()]);
    let md = text(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{md}{}", text(&o.stderr));
    assert!(md.contains("| s/p | base |") && md.contains("| s/p | cand |"), "{md}");
    assert!(md.contains("2 regressions, 0 improvements, 0 within noise."), "{md}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ci.path().join("cmp.json")).unwrap()).unwrap();
    assert_eq!(json["regressions"], 2, "{json}");
    for cell in json["cells"].as_array().unwrap() {
        assert_eq!(cell["verdict"], "regression", "{cell}");
        assert!(cell["throughput"]["interval"]["high"].as_f64().unwrap() < 0.95, "{cell}");
        assert_eq!((cell["a"]["repeats"].as_u64(), cell["b"]["repeats"].as_u64()), (Some(3), Some(3)));
    }
    // Back again it is an improvement; a run against itself is a mistake.
    assert_eq!(compare(&slow, &fast, &[]).status.code(), Some(0));
    assert!(text(&compare(&slow, &fast, &[]).stdout).contains("0 regressions, 2 improvements"));
    let same = compare(&fast, &fast, &[]);
    assert_eq!(same.status.code(), Some(3), "{}", text(&same.stdout));
    assert!(text(&same.stderr).contains("is given twice"), "{}", text(&same.stderr));
    // A folder holding exactly one run stands for it (an `--out` folder).
    let holder = tempfile::tempdir().unwrap();
    let only = edited_copy(&slow, holder.path(), |_| {});
    assert_eq!(compare(&fast, holder.path(), &[]).status.code(), compare(&fast, &only, &[]).status.code());
    assert!(text(&compare(&fast, holder.path(), &[]).stdout).contains("2 regressions"));
    edited_copy(&fast, holder.path(), |_| {});
    let o = compare(&fast, holder.path(), &[]);
    assert!(
        o.status.code() == Some(3) && text(&o.stderr).contains("holds 2 runs: give one of them"),
        "{}",
        text(&o.stderr)
    );

    // Runs that cannot be compared: clear errors, exit 3.
    let scratch = tempfile::tempdir().unwrap();
    let other_spec = edited_copy(&slow, &scratch.path().join("a"), |r| r["run"]["name"] = "other".into());
    let o = compare(&fast, &other_spec, &[]);
    assert_eq!(o.status.code(), Some(3));
    assert!(
        text(&o.stderr).contains("ran spec `reports-e2e`") && text(&o.stderr).contains("same spec"),
        "{}",
        text(&o.stderr)
    );
    let disjoint = edited_copy(&slow, &scratch.path().join("b"), |r| {
        for c in r["cells"].as_array_mut().unwrap() {
            c["scenario"] = "elsewhere".into();
        }
    });
    let o = compare(&fast, &disjoint, &[]);
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("no cell completed in both runs"), "{}", text(&o.stderr));
    let o = compare(&fast, scratch.path(), &[]);
    assert!(o.status.code() == Some(3) && text(&o.stderr).contains("is not a run directory"), "{}", text(&o.stderr));
}

#[test]
fn report_into_rewrites_only_its_section_and_is_idempotent() {
    let _load = shared();
    let (_d, spec) = spec_file(SPEC);
    let r = run(&spec, &["--set", "duration=500ms"]);
    let dir = r.dir.clone().expect("a run directory");
    let docs = tempfile::tempdir().unwrap();
    let bench = docs.path().join("BENCHMARK.md");
    let before = "# Benchmarks\r\n\r\nHand-written intro with trailing spaces   \n\n## 7.2\n\nOld numbers.\n\n<!-- faultline:begin other -->\nkept\n<!-- faultline:end other -->\n\n## Appendix\nno newline at the end";
    std::fs::write(&bench, before).unwrap();
    let into_as = |section: &str, new: bool| {
        let mut report = faultline();
        report.arg("report").arg(&dir).arg("--into").arg(&bench).arg("--section").arg(section);
        if new {
            report.arg("--new-section");
        }
        report.output().unwrap()
    };
    let into = |section: &str| into_as(section, false);

    // A name the file lacks, beside another section: a typo until said otherwise.
    let o = into("kv-durabilty");
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("it has no section `kv-durabilty`, but has `other`"), "{}", text(&o.stderr));
    assert_eq!(std::fs::read_to_string(&bench).unwrap(), before);
    let o = into_as("kv-durability", true);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let first = std::fs::read_to_string(&bench).unwrap();
    assert!(first.starts_with(before), "every byte before stays");
    let added = &first[before.len()..];
    assert!(added.starts_with("\n\n<!-- faultline:begin kv-durability -->\n### faultline: reports-e2e\n"), "{added}");
    assert!(added.ends_with("<!-- faultline:end kv-durability -->\n"), "{added}");
    assert!(added.contains("| s/p | cand | base |"), "{added}");
    assert!(added.contains("](kv-durability-charts/ratios-s.svg)"), "{added}");
    let svg = docs.path().join("kv-durability-charts/ratios-s.svg");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("</svg>"));
    let chart_time = std::fs::metadata(&svg).unwrap().modified().unwrap();

    // Again: nothing changes, not even the charts' times.
    let o = into("kv-durability");
    assert!(text(&o.stdout).contains("unchanged"), "{}", text(&o.stdout));
    assert_eq!(std::fs::read_to_string(&bench).unwrap(), first);
    assert_eq!(std::fs::metadata(&svg).unwrap().modified().unwrap(), chart_time);

    // Edits around the section survive a rewrite of it; its old content does not.
    let edited = first.replace("Old numbers.", "Old numbers, edited.").replace("### faultline: reports-e2e", "stale");
    std::fs::write(&bench, &edited).unwrap();
    assert_eq!(into("kv-durability").status.code(), Some(0));
    assert_eq!(std::fs::read_to_string(&bench).unwrap(), first.replace("Old numbers.", "Old numbers, edited."));

    // Bad input: a clear error, the file untouched.
    let now = std::fs::read(&bench).unwrap();
    for (section, why) in [("a b", "a section name is"), ("x-->", "a section name is")] {
        let o = into(section);
        assert_eq!(o.status.code(), Some(3));
        assert!(text(&o.stderr).contains(why), "{}", text(&o.stderr));
    }
    let mut broken = now.clone();
    broken.extend_from_slice(b"\n<!-- faultline:begin half -->\n");
    std::fs::write(&bench, &broken).unwrap();
    let o = into("half");
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("has no `<!-- faultline:end half -->`"), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(&bench).unwrap(), broken);
    assert!(!docs.path().join("half-charts").exists(), "no charts for a section that was not written");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bench, std::fs::Permissions::from_mode(0o444)).unwrap();
    let o = into("kv-durability");
    assert_eq!(o.status.code(), Some(3));
    assert!(text(&o.stderr).contains("is not writable"), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(&bench).unwrap(), broken);
    let leftovers: Vec<_> = std::fs::read_dir(docs.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 2, "no temporary files left: {leftovers:?}");
}

/// Every shipped template, rendered on real runs of the kinds it is for,
/// shows the provenance table (the server as it named itself, the binary
/// with its digest, the arguments, the host) and names no product the run
/// did not drive: secantusd-rs is never called "mongodb 8.2.11".
#[test]
fn every_shipped_template_shows_the_provenance_and_names_only_the_server_that_ran() {
    let _load = shared();
    let spec = |kind: &str, options: &str, args: &str| {
        format!(
            r#"name: provenance-{kind}
targets:
  db: {{kind: {kind}, provider: process, ready_timeout: 30s{options}{args}}}
workloads:
  w: {{ops: {{get: 1, set: 1}}, keys: {{count: 50}}}}
profiles:
  p: {{closed: 1x1}}
timing: {{warmup: 0s, duration: 500ms}}
scenarios:
  - {{name: s, target: db, workload: w, profiles: [p]}}
"#
        )
    };
    let kinds = [
        // (kind, options, args, the server's own name, the binary, foreign names)
        ("redis", "", ", args: [\"--save\", \"\"]", "redis ", "redis-server", &["mongodb", "valkey", "DynamoDB"][..]),
        (
            "mongodb",
            ", options: {database: fl_prov}",
            "",
            "secantus ",
            "secantusd-rs",
            &["mongodb 8", "mongod ", "redis"][..],
        ),
        (
            "dynamodb",
            ", options: {table: {name: fl-prov}}",
            "",
            "DynamoDB API",
            "moto_server",
            &["mongodb", "redis"][..],
        ),
        ("etcd", "", "", "etcd 3.4", "etcd", &["mongodb", "redis", "DynamoDB"][..]),
    ];
    let templates = |kind: &str| {
        let mut t = vec![None, Some(repo().join("reports/templates/section.md.j2"))];
        match kind {
            "mongodb" => t.push(Some(repo().join("specs/templates/mongodb.md.j2"))),
            "dynamodb" => t.push(Some(repo().join("specs/templates/dynamodb.md.j2"))),
            "etcd" => t.push(Some(repo().join("specs/templates/etcd.md.j2"))),
            _ => {}
        }
        t
    };
    for (kind, options, args, server, binary, foreign) in kinds {
        let (_d, path) = spec_file(&spec(kind, options, args));
        let r = run(&path, &[]);
        let dir = r.dir.clone().expect("a run directory");
        assert!(r.results()["targets"][0]["server"].as_str().unwrap().starts_with(server), "{kind}: {}", r.stderr());
        for template in templates(kind) {
            let out = tempfile::tempdir().unwrap();
            let doc = out.path().join("DOC.md");
            let mut cmd = faultline();
            cmd.arg("report").arg(&dir);
            match &template {
                Some(t) if t.ends_with("section.md.j2") => {
                    std::fs::write(&doc, "# Doc\n").unwrap();
                    cmd.arg("--into").arg(&doc).arg("--section").arg("prov");
                }
                Some(t) => {
                    cmd.arg("--template").arg(t);
                }
                None => {}
            }
            let o = cmd.output().unwrap();
            let name = format!(
                "{kind} with {}",
                template.as_ref().map_or("default.md.j2".into(), |t| t.display().to_string())
            );
            assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o.stderr));
            let rendered = match &template {
                Some(t) if t.ends_with("section.md.j2") => std::fs::read_to_string(&doc).unwrap(),
                _ => std::fs::read_to_string(dir.join("report.md")).unwrap(),
            };
            let target_row = rendered
                .lines()
                .find(|l| l.starts_with("| Target `db` |"))
                .unwrap_or_else(|| panic!("{name}: no target row\n{rendered}"));
            assert!(target_row.contains(&format!("| {server}")), "{name}: {target_row}");
            assert!(target_row.contains(&format!("/{binary}` sha256 ")), "{name}: {target_row}");
            assert!(
                target_row.contains("; args `") || target_row.contains("; no args beyond faultline's own"),
                "{name}: {target_row}"
            );
            assert!(rendered.lines().any(|l| l.starts_with("| Host | ")), "{name}: no host row\n{rendered}");
            for f in foreign {
                assert!(!rendered.contains(f), "{name} names `{f}`:\n{rendered}");
            }
        }
    }
}

/// A matrix of two fsync modes (two servers of one target), a crash in each
/// and an informational gate, as a section under a `###` heading of a
/// document that also shows the markers in a code fence.
const NESTED: &str = r#"name: nested-e2e
targets:
  cache: {kind: redis, provider: process, args: ["--save", "", "--appendonly", "yes", "--appendfsync", "{fsync}"]}
workloads:
  w: {ops: {set: 1}, keys: {count: 100000}, value_size: 64B}
profiles:
  p: {closed: 2x4}
timing: {warmup: 0s, duration: 1s, deadline: 2s}
scenarios:
  - name: crash
    target: cache
    workload: w
    profiles: [p]
    matrix: {fsync: [always, everysec]}
    faults: [{name: crash, at: 500ms, action: restart, target: cache}]
checkers: [lost-acknowledged-write]
gates:
  nothing-lost: lost_acked_writes == 0
  for-context: {expr: errors == 0, informational: true}
"#;

#[test]
fn report_into_nests_under_the_host_heading_and_leaves_fenced_markers_alone() {
    let _load = shared();
    let (_d, spec) = spec_file(NESTED);
    let r = run(&spec, &[]);
    let dir = r.dir.clone().expect("a run directory");
    assert!(r.report().contains("## Crash recovery"), "{}", r.report());
    let docs = tempfile::tempdir().unwrap();
    let bench = docs.path().join("BENCHMARK.md");
    let example = "```md\n<!-- faultline:begin kv -->\n<!-- faultline:end kv -->\n```\n";
    let before = format!(
        "# Bench\n\nMark a section like this:\n\n{example}\n## Results\n\n### Durability\n\n<!-- faultline:begin kv -->\nold\n<!-- faultline:end kv -->\n\n## Appendix\n"
    );
    std::fs::write(&bench, &before).unwrap();
    let o = faultline().arg("report").arg(&dir).arg("--into").arg(&bench).arg("--section").arg("kv").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let after = std::fs::read_to_string(&bench).unwrap();
    assert!(after.contains(example), "the fenced example stays: {after}");
    assert!(!after.contains("\nold\n") && after.ends_with("<!-- faultline:end kv -->\n\n## Appendix\n"), "{after}");
    let section = &after[after.find("### Durability").unwrap()..];
    assert!(section.contains("\n#### nested-e2e") || section.contains("\n#### faultline: nested-e2e"), "{section}");
    assert!(section.contains("\n##### Crash recovery\n"), "{section}");
    assert!(!section.contains("\n## Crash") && !section.contains("\n### "), "{section}");
    assert!(section.contains("(information only)"), "{section}");
    // The provenance names each server once, the host once.
    let targets: Vec<&str> = section.lines().filter(|l| l.starts_with("| Target `")).collect();
    let mut names: Vec<&str> = targets.iter().map(|l| l.split('`').nth(1).unwrap()).collect();
    names.sort_unstable();
    names.dedup();
    assert!(!targets.is_empty() && names.len() == targets.len(), "each server once: {targets:?}");
    assert_eq!(section.lines().filter(|l| l.starts_with("| Host | ")).count(), 1, "{section}");
}

#[test]
fn junit_refuses_a_file_it_may_not_write_before_anything_runs() {
    let (_d, spec) = spec_file(SPEC);
    let out = tempfile::tempdir().unwrap();
    let junit = out.path().join("junit.xml");
    std::fs::write(&junit, "kept").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&junit, std::fs::Permissions::from_mode(0o444)).unwrap();
    let runs = out.path().join("runs");
    let o = faultline().arg("run").arg(&spec).arg("--junit").arg(&junit).arg("--out").arg(&runs).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("--junit") && text(&o.stderr).contains("is not writable"), "{}", text(&o.stderr));
    assert_eq!(std::fs::read_to_string(&junit).unwrap(), "kept");
    assert!(!runs.exists(), "nothing ran");
    let o = faultline().arg("run").arg(&spec).arg("--junit").arg(out.path()).arg("--out").arg(&runs).output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("is not a file"), "{}", text(&o.stderr));
}
