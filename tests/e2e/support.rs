//! What the end-to-end tests share: the binary, runs in temp directories,
//! real servers the tests control, and the questions every test asks of a
//! run the same way (is it up yet, did it pass or say why it could not).

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

pub fn faultline() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_faultline"));
    cmd.current_dir(repo());
    cmd
}

/// Tests run two at a time (libtest's default on two cores). Most run beside
/// another: they assert what faultline recorded and decided, which a shared
/// CPU does not change. A few must have the machine to themselves: see
/// [`exclusive`].
static MACHINE: RwLock<()> = RwLock::new(());

/// Held by a test that runs beside others: servers, load and faults of its
/// own, and nothing it looks at that another test's run changes.
pub fn shared() -> Hold<RwLockReadGuard<'static, ()>> {
    Hold::take("shared", || MACHINE.read().unwrap_or_else(|e| e.into_inner()))
}

/// Held by a test that needs the machine alone: it reads or clears what
/// every run shares (all containers, networks, firewall rules, agent
/// processes, the default state directory's ledger), it loads the host on
/// purpose, or its own timing bounds are what it tests. Such a test is also
/// `#[ignore = "alone: …"]`: scripts/test.sh runs them after the others, in
/// a pass of their own (`-- --ignored`). Queued among the others, each one
/// waited in a libtest thread for its neighbour to end while the other
/// place stayed empty: 143 s of a 627 s suite, 84 s of it behind one
/// campaign (docs/testing.md). std's RwLock on Linux holds new readers back
/// while a writer waits, so an exclusive test run among others
/// (`--include-ignored`) is not starved.
pub fn exclusive() -> Hold<RwLockWriteGuard<'static, ()>> {
    // libtest runs an ignored test only when asked for them: an exclusive
    // test that got here without being asked lacks its #[ignore], and would
    // leave the other place idle in the first pass again.
    assert!(
        std::env::args().any(|a| a == "--ignored" || a == "--include-ignored"),
        "a test that holds exclusive() is #[ignore = \"alone: needs the machine to itself; scripts/test.sh runs it after the rest\"]"
    );
    Hold::take("exclusive", || MACHINE.write().unwrap_or_else(|e| e.into_inner()))
}

/// Held by the shipped campaigns that keep about one core busy for a minute
/// or more while asserting only what they recorded (every cell completed,
/// every fault confirmed and healed, nothing acknowledged lost): one such
/// test at a time, beside a light one. Two of them together would only slow
/// each other; a light test beside one uses the core it leaves (the
/// durability campaign: 99 s of wall time for 90 s of CPU).
pub fn heavy() -> Hold<(MutexGuard<'static, ()>, RwLockReadGuard<'static, ()>)> {
    static HEAVY: Mutex<()> = Mutex::new(());
    Hold::take("heavy", || {
        // HEAVY first: a test never waits for it while holding the machine,
        // so an exclusive test waiting for the machine is never held up by it.
        let one_heavy = HEAVY.lock().unwrap_or_else(|e| e.into_inner());
        (one_heavy, MACHINE.read().unwrap_or_else(|e| e.into_inner()))
    })
}

/// A test's hold on the machine. With `FAULTLINE_E2E_TIMINGS=FILE` set,
/// letting go appends one line to FILE: the hold's kind, the test, and when
/// it asked, got and let go (seconds since the binary's first ask), from
/// which docs/testing.md says where the suite's time goes.
pub struct Hold<G> {
    _guard: G,
    kind: &'static str,
    asked: Duration,
    got: Duration,
}

impl<G> Hold<G> {
    fn take(kind: &'static str, lock: impl FnOnce() -> G) -> Hold<G> {
        let asked = suite_clock();
        let guard = lock();
        Hold { _guard: guard, kind, asked, got: suite_clock() }
    }
}

impl<G> Drop for Hold<G> {
    fn drop(&mut self) {
        let Some(file) = std::env::var_os("FAULTLINE_E2E_TIMINGS") else { return };
        let test = std::thread::current().name().unwrap_or("?").to_string();
        let line = format!(
            "{}\t{test}\t{:.1}\t{:.1}\t{:.1}\n",
            self.kind,
            self.asked.as_secs_f64(),
            self.got.as_secs_f64(),
            suite_clock().as_secs_f64()
        );
        // A figure lost is no reason to fail a test, nor to abort one that panicked.
        if let Ok(mut out) = std::fs::OpenOptions::new().create(true).append(true).open(file) {
            let _ = std::io::Write::write_all(&mut out, line.as_bytes());
        }
    }
}

fn suite_clock() -> Duration {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

pub struct Run {
    pub output: Output,
    pub dir: Option<PathBuf>,
    pub _out: tempfile::TempDir,
}

impl Run {
    pub fn code(&self) -> i32 {
        self.output.status.code().expect("exited normally")
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn results(&self) -> serde_json::Value {
        let dir = self.dir.as_ref().expect("a run directory was created");
        let text = std::fs::read_to_string(dir.join("results.json")).unwrap_or_else(|e| {
            panic!("results.json not written ({e}); exit {:?}, stderr:\n{}", self.output.status.code(), self.stderr())
        });
        serde_json::from_str(&text).expect("results.json is JSON")
    }
    pub fn report(&self) -> String {
        std::fs::read_to_string(self.dir.as_ref().unwrap().join("report.md")).expect("report.md written")
    }
}

/// `faultline run SPEC ARGS… --out <fresh temp dir>`.
pub fn run(spec: &Path, args: &[&str]) -> Run {
    let out = tempfile::tempdir().unwrap();
    let output =
        faultline().arg("run").arg(spec).args(args).arg("--out").arg(out.path()).output().expect("faultline runs");
    let dir = run_dir(out.path());
    Run { output, dir, _out: out }
}

pub fn run_dir(out: &Path) -> Option<PathBuf> {
    std::fs::read_dir(out).ok()?.filter_map(|e| e.ok()).map(|e| e.path()).find(|p| p.is_dir())
}

/// A spec written to a temp file (kept alive by the returned guard).
pub fn spec_file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.yaml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A real redis-server the test controls (for faults the test injects itself).
pub struct RedisServer {
    pub port: u16,
    child: Child,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        Self::start_on(free_port())
    }

    pub fn start_on(port: u16) -> RedisServer {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is installed (apt-get install redis-server)");
        let server = RedisServer { port, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.cli(&["PING"]).as_deref() != Some("PONG") {
            assert!(Instant::now() < deadline, "redis-server on {port} did not come up");
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }

    pub fn cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("redis-cli").args(["-p", &self.port.to_string()]).args(args).output().ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// Load clients connected: normal clients whose last command was one
    /// of the load's (a replication link is a client too, flag M).
    pub fn load_clients(&self) -> usize {
        let list = self.cli(&["CLIENT", "LIST"]).unwrap_or_default();
        list.lines().filter(|l| l.contains(" flags=N ") && (l.contains(" cmd=get ") || l.contains(" cmd=set "))).count()
    }
}

impl RedisServer {
    /// SIGKILL, as a crash would.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Processes whose command line contains `needle` (excluding pgrep itself).
pub fn processes_matching(needle: &str) -> Vec<String> {
    let out = Command::new("pgrep").args(["-af", needle]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.contains("pgrep")).map(str::to_string).collect()
}

/// The containers (all states) and networks of the run in `run_dir` still on
/// the engine: found by the `faultline.run` label faultline gives all it
/// creates, so other test runs sharing the engine do not count.
pub fn left_behind(run_dir: &Path) -> Vec<String> {
    labelled_with_run(&docker_run_id(run_dir))
}

/// The containers and networks labelled `faultline.run=RUN_ID`.
pub fn labelled_with_run(run_id: &str) -> Vec<String> {
    let filter = format!("label=faultline.run={run_id}");
    let names = |args: &[&str]| -> Vec<String> {
        let out = Command::new("docker").args(args).output().expect("the docker CLI is installed");
        assert!(out.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
    };
    let mut left = names(&["ps", "-a", "--filter", &filter, "--format", "container {{.Names}}"]);
    left.extend(names(&["network", "ls", "--filter", &filter, "--format", "network {{.Name}}"]));
    left
}

/// The `faultline.run` label of the run in `run_dir`, made as
/// `faultline_kind::ledger::run_id` makes it (the directory's name
/// and a hash of its path). `teardown_removes_what_a_killed_faultline_left`
/// holds it to the label a live run's containers carry, so [`left_behind`]
/// cannot look for the wrong label and find nothing.
pub fn docker_run_id(run_dir: &Path) -> String {
    let full = std::fs::canonicalize(run_dir).unwrap();
    let name: String = run_dir
        .file_name()
        .unwrap()
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' })
        .collect();
    let name = if name.len() > 48 { name[name.len() - 48..].trim_start_matches('-').to_string() } else { name };
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in full.to_string_lossy().bytes() {
        hash = (hash ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{name}-{:06x}", hash & 0xff_ffff)
}

/// Containers (all states) and networks on the machine, by id and name:
/// for a run refused before it made a run directory (nothing to label).
pub fn docker_snapshot() -> (BTreeSet<String>, BTreeSet<String>) {
    let lines = |args: &[&str]| -> BTreeSet<String> {
        let out = Command::new("docker").args(args).output().expect("the docker CLI is installed");
        assert!(out.status.success(), "docker {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
    };
    (lines(&["ps", "-a", "--format", "{{.ID}} {{.Names}}"]), lines(&["network", "ls", "--format", "{{.ID}} {{.Name}}"]))
}

/// Starts `faultline run SPEC` (run ledgers in `state`), waits until its
/// run.log says `line`, and SIGKILLs it; returns the run directory.
pub fn killed_when(
    spec: &std::path::Path,
    state: &std::path::Path,
    out: &std::path::Path,
    line: &str,
) -> std::path::PathBuf {
    let mut child = faultline()
        .arg("run")
        .arg(spec)
        .arg("--out")
        .arg(out)
        .env("FAULTLINE_STATE_DIR", state)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let dir = wait_for_log(out, line, Duration::from_secs(90));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
    dir
}

/// Waits until the run writing into `out` has `line` in its run.log (a
/// limit only a hang reaches), and returns the run directory: a test acts
/// on what faultline said it did, not on a guess of how long it takes.
pub fn wait_for_log(out: &Path, line: &str, within: Duration) -> PathBuf {
    let deadline = Instant::now() + within;
    loop {
        let dir = run_dir(out);
        let log = dir.as_ref().and_then(|d| std::fs::read_to_string(d.join("run.log")).ok()).unwrap_or_default();
        if log.contains(line) {
            return dir.unwrap();
        }
        assert!(Instant::now() < deadline, "no `{line}` in run.log after {within:?}: {log}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `ok` every 20 ms until it holds or `within` passes; whether it
/// held. The limit only catches a hang: what the test waits for is
/// faultline's doing, and a busy machine only makes it later.
pub fn wait_until(within: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ok()
}

/// Whether a gate's evidence is faultline's word for a gate it could not
/// judge because the machine was too slow for what the spec asked, that
/// moment: an open loop that could not send its schedule, a recovery to
/// the rate before a fault not seen within the window.
fn too_slow(evidence: &str) -> bool {
    evidence.contains("below min_sent") || (evidence.contains("recovered(") && evidence.contains("was not measured"))
}

/// Whether the run passed (true), or did not only because the machine was
/// slow that moment and faultline said so (false). Then every gate that did
/// not pass is either incomplete with one of faultline's reasons for a slow
/// moment, or one of `speed_gates` (the spec's gates on how fast this
/// machine and its server are: a latency, a denied window, a recovery)
/// failing on what it measured, which is faultline measuring right; and
/// the verdict says only that. Anything else (another gate failing, another
/// reason) fails the test here. Measured values a test checks on a pass are
/// then checked only where faultline measured them.
pub fn measured_as_asked(run: &Run, speed_gates: &[&str]) -> bool {
    measured_as_asked_or_undecided(run, speed_gates, &[])
}

/// [`measured_as_asked`], where the gates named in `undecided` may also be
/// incomplete: a test lets them be when faultline said its checker could
/// not decide within its limits on a slow machine (the test checks that
/// word itself). Such a run is never a PASS.
pub fn measured_as_asked_or_undecided(run: &Run, speed_gates: &[&str], undecided: &[&str]) -> bool {
    let r = run.results();
    let context = || format!("{}\n{}", run.stdout(), run.stderr());
    if run.code() == 0 {
        assert_eq!(r["verdict"], "PASS", "{}", context());
        return true;
    }
    assert!([1, 2].contains(&run.code()), "exit {}: {}", run.code(), context());
    let gates = r["gates"].as_array().unwrap();
    for reason in r["verdict_reasons"].as_array().unwrap() {
        let reason = reason.as_str().unwrap();
        let gate = reason.strip_prefix("gate `").and_then(|rest| rest.split('`').next());
        assert!(gate.is_some(), "not a gate's reason: {reason}\n{}", context());
    }
    for gate in gates.iter().filter(|g| g["result"] != "pass" && g["informational"] != true) {
        let evidence = gate["evidence"].as_str().unwrap_or_default();
        let speed = speed_gates.contains(&gate["name"].as_str().unwrap());
        match gate["result"].as_str() {
            Some("fail") if speed => {}
            Some("incomplete") if too_slow(evidence) || undecided.contains(&gate["name"].as_str().unwrap()) => {}
            _ => panic!("not a slow moment: {gate}\n{}", context()),
        }
    }
    eprintln!("the machine was slow for the spec that moment: {}", r["verdict_reasons"]);
    false
}

/// What a run of specs/quickstart-safety.yaml must show on a healthy
/// redis-server: four checkers, each of which judged the history and found
/// it clean. The linearizability search on the hot key is exponential in
/// how many of its ops overlap: on a machine slowed down for a moment
/// (latency ten times the usual) it can reach its memory cap or time budget
/// and say `unknown`, by its own word; its gate is then INCOMPLETE with that
/// word in its evidence (never a pass), and the run is not a PASS. The open
/// loop at 20,000/s may find the machine too slow to send its schedule, and
/// a busy machine may push a get's p99 past the spec's 30 ms: those are
/// measured as such.
pub fn quickstart_safety_judged(run: &Run) {
    let r = run.results();
    let checks = r["cells"][0]["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 4);
    let gave_up = |c: &serde_json::Value| {
        let note = c["note"].as_str().unwrap_or_default();
        c["checker"] == "linearizability"
            && c["status"] == "unknown"
            && (note.starts_with("memory cap of") || note.starts_with("time budget of"))
    };
    let undecided = checks.iter().any(gave_up);
    let gates: &[&str] = if undecided { &["linearizable"] } else { &[] };
    let passed = measured_as_asked_or_undecided(run, &["fast-gets"], gates);
    assert!(!(passed && undecided), "a PASS with an undecided check: {checks:?}");
    for c in checks.iter().filter(|c| !gave_up(c)) {
        assert_eq!(c["status"], "ok", "{c}");
        assert!(c["checked"].as_u64().unwrap() > 0, "{c}");
    }
    if undecided {
        let gate = r["gates"].as_array().unwrap().iter().find(|g| g["name"] == "linearizable").unwrap();
        assert_eq!(gate["result"], "incomplete", "{gate}");
        assert!(gate["evidence"].as_str().unwrap().contains("checker could not decide"), "{gate}");
    }
}
