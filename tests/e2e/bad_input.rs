//! Input that used to crash or hang faultline: a load that does not fit in
//! memory, a plan past the cell limit that `validate` passed, and files that
//! are not regular files (a FIFO blocks a reader forever, /dev/zero never
//! ends) wherever a command reads one.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use crate::support::*;

/// Runs `faultline ARGS`, killing it if it outlives `limit` (a hang is a failure, not a stuck test).
fn within(limit: Duration, args: &[&std::ffi::OsStr]) -> Output {
    let mut child = faultline()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("faultline {args:?} still ran after {limit:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

#[test]
fn a_load_that_does_not_fit_in_memory_is_refused_by_run_before_anything_starts() {
    for spec in ["160-closed-load-beyond-memory.yaml", "161-open-load-beyond-memory.yaml"] {
        let path = repo().join("tests/bad_specs").join(spec);
        let run = run(&path, &[]);
        let stderr = run.stderr();
        assert_eq!(run.code(), 3, "{spec}: {stderr}");
        assert!(stderr.contains("would need about") && stderr.contains("GiB"), "{spec}: {stderr}");
        assert!(run.dir.is_none(), "{spec}: no run directory for a refused spec");
    }
}

#[test]
fn validate_refuses_the_plan_run_refuses_with_the_same_words() {
    let path = repo().join("tests/bad_specs/162-matrix-plan-beyond-cell-limit.yaml");
    let validate = faultline().arg("validate").arg(&path).output().unwrap();
    let run = run(&path, &[]);
    let said = String::from_utf8_lossy(&validate.stderr).into_owned();
    assert_eq!(validate.status.code(), Some(3), "{said}");
    assert_eq!(run.code(), 3, "{}", run.stderr());
    assert!(said.contains("more than 10000 cells"), "{said}");
    assert_eq!(said, run.stderr(), "validate and run give the same error");
    // Within every limit, validate counts the cells of the plan run would build.
    let (_d, spec) = spec_file(
        "name: x\ntargets:\n  t: {kind: redis, provider: process}\nworkloads:\n  w: {ops: {get: 1}}\n\
         profiles:\n  p: {closed: 1x1}\nscenarios:\n  - {name: s, target: t, workload: w, profiles: [p]}\n",
    );
    let ok = faultline().arg("validate").arg(&spec).output().unwrap();
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    assert!(String::from_utf8_lossy(&ok.stdout).contains("ok (1 scenario, 1 cell)"));
}

/// A run directory whose results.json is not a regular file.
fn run_dir_with_results(results: impl FnOnce(&Path)) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir(&run).unwrap();
    results(&run.join("results.json"));
    (dir, run)
}

#[test]
fn no_command_reads_a_fifo_or_a_device_as_a_file() {
    let limit = Duration::from_secs(20);
    let (_a, fifo_run) = run_dir_with_results(mkfifo);
    let (_b, zero_run) = run_dir_with_results(|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap());
    for dir in [&fifo_run, &zero_run] {
        let out = within(limit, &["report".as_ref(), dir.as_os_str()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "report {}: {stderr}", dir.display());
        assert!(stderr.contains("not a regular file"), "{stderr}");
    }

    let scratch = tempfile::tempdir().unwrap();
    let fifo = scratch.path().join("fifo");
    mkfifo(&fifo);
    // check: whatever the budget, a FIFO is refused at once.
    let out = within(
        limit,
        &["check".as_ref(), "--model".as_ref(), "kv".as_ref(), "--budget".as_ref(), "3600s".as_ref(), fifo.as_os_str()],
    );
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a FIFO, not a regular file"));
    // A spec, a plugin.
    for command in [&["validate"][..], &["plugin", "check"]] {
        let mut args: Vec<&std::ffi::OsStr> = command.iter().map(|a| a.as_ref()).collect();
        args.push(fifo.as_os_str());
        let out = within(limit, &args);
        assert_ne!(out.status.code(), Some(0), "{command:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("not a regular file"),
            "{command:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // A real run's report, re-rendered with a FIFO as template and into a FIFO.
    let _load = shared();
    let (_d, spec) = spec_file(
        "name: files\ntargets:\n  t: {kind: redis, provider: process}\nworkloads:\n  w: {ops: {get: 1}}\n\
         profiles:\n  p: {closed: 1x1}\ntiming: {warmup: 0s, duration: 300ms}\n\
         scenarios:\n  - {name: s, target: t, workload: w, profiles: [p]}\ngates:\n  g: errors == 0\n",
    );
    let done = crate::support::run(&spec, &[]);
    assert_eq!(done.code(), 0, "{}", done.stderr());
    let dir = done.dir.clone().unwrap();
    let out = within(limit, &["report".as_ref(), dir.as_os_str(), "--template".as_ref(), fifo.as_os_str()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a FIFO, not a regular file"));
    let out = within(
        limit,
        &["report".as_ref(), dir.as_os_str(), "--into".as_ref(), fifo.as_os_str(), "--section".as_ref(), "s".as_ref()],
    );
    assert_eq!(out.status.code(), Some(3));
}
