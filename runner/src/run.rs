//! `faultline run`: load and plan the spec, run the engine with signal
//! handling, decide the verdict, and write results.json and the report into a
//! fresh run directory.

use std::path::{Path, PathBuf};

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::plan::{self, PlanOptions};
use crate::plugin::SpecPlugins;
use crate::results::{host_info, ResultsFile};
use crate::{spec, EXIT_USAGE};
use faultline_engine::events::Events;
use faultline_engine::{provenance, Engine, LoadThreads, Place};
use faultline_judge::RunFacts;
use faultline_model::results::{AgentInfo, Results, RunInfo, Verdict, SCHEMA_VERSION};
use faultline_report as report;

pub struct RunArgs {
    pub spec: PathBuf,
    pub set: Vec<(String, String)>,
    pub quick: bool,
    pub only: Vec<String>,
    pub out: PathBuf,
    pub dry_run: bool,
    /// Where to write the verdict as JUnit XML.
    pub junit: Option<PathBuf>,
    /// Threads the pipelined lanes run on (default: half the cores).
    pub load_threads: Option<usize>,
    /// Run the load on agents.
    pub agents: Option<AgentsArgs>,
}

/// `--agents` and where they dial in.
pub struct AgentsArgs {
    pub launcher: crate::agent::launch::Launcher,
    pub listen: Option<std::net::SocketAddr>,
    /// The run's agent key (`wait` needs it; `local` and `swarm` make one).
    pub key_file: Option<PathBuf>,
    /// Swarm: the image to run (default: made here from `base`).
    pub image: Option<String>,
    pub base: String,
}

pub fn run(args: RunArgs) -> u8 {
    let loaded = match spec::load(&args.spec, &args.set, &crate::kinds::CATALOG) {
        Ok(l) => l,
        Err(e) => {
            crate::stdout::say_err!("error: {e}");
            return EXIT_USAGE;
        }
    };
    for warning in loaded.warnings(&args.spec) {
        eprintln!("warning: {warning}");
    }
    let options = PlanOptions { quick: args.quick, only: args.only.clone() };
    let plan = match plan::build(&loaded, &options) {
        Ok(p) => p,
        Err(e) => {
            crate::stdout::say_err!("error: {}: {e}", args.spec.display());
            return EXIT_USAGE;
        }
    };
    let template = loaded.spec.report.template.as_ref().map(|t| args.spec.parent().unwrap_or(Path::new(".")).join(t));
    if let Some(t) = &template {
        if let Err(e) = report::check_template(t) {
            crate::stdout::say_err!("error: {}: field `report.template`: {e:#}", args.spec.display());
            return EXIT_USAGE;
        }
    }
    // Checked like `report --into` checks its file, before anything runs:
    // a campaign must not end on a file it may not write.
    let junit = match args.junit.as_deref().map(report::section::Destination::open).transpose() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: --junit: {e:#}");
            return EXIT_USAGE;
        }
    };
    if let Some(a) = &args.agents {
        let swarm = matches!(a.launcher, crate::agent::launch::Launcher::Swarm(_));
        if !swarm && (a.image.is_some() || a.base != crate::agent::launch::DEFAULT_AGENT_BASE) {
            crate::stdout::say_err!(
                "error: --agent-image and --agent-base choose the image of `--agents swarm:N`; \
                 `--agents {}:N` runs this binary itself: drop them",
                a.launcher.name().replace("external", "wait")
            );
            return EXIT_USAGE;
        }
        if let Err(e) = crate::agent::unsupported(&loaded.spec, &plan) {
            crate::stdout::say_err!("error: {}: {e}", args.spec.display());
            return EXIT_USAGE;
        }
        if let Err(e) = agent_key(a) {
            crate::stdout::say_err!("error: {e:#}");
            return EXIT_USAGE;
        }
        if let Some(path) = &a.key_file {
            if let Some(warning) = crate::agent::link::LinkKey::shared_warning(path) {
                crate::stdout::say_err!("warning: {warning}");
            }
        }
    }
    if args.dry_run {
        crate::stdout::print(&plan.describe(&loaded.spec, &crate::kinds::CATALOG));
        return 0;
    }
    // The handlers come before anything is created: a signal from here on
    // stops the run the orderly way, with a results.json, however early.
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start a runtime: {e}");
            return EXIT_USAGE;
        }
    };
    let signals = match StopSignals::install(&runtime) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: cannot handle SIGINT and SIGTERM: {e}");
            return EXIT_USAGE;
        }
    };
    if let Err(e) = images_present(&loaded.spec, &plan) {
        crate::stdout::say_err!("error: {}: {e}", args.spec.display());
        return EXIT_USAGE;
    }
    if let Err(e) = swarm_ready(args.agents.as_ref(), &runtime) {
        crate::stdout::say_err!("error: --agents: {e:#}");
        return EXIT_USAGE;
    }
    let plugins = match SpecPlugins::load(&args.spec, &loaded) {
        Ok(p) => p,
        Err(e) => {
            crate::stdout::say_err!("error: {e}");
            return EXIT_USAGE;
        }
    };
    let outputs = Outputs { template: template.as_deref(), junit: junit.as_ref() };
    match execute(&args, &loaded, &plan, outputs, &plugins, &runtime, signals) {
        Ok(code) => code,
        Err(e) => {
            crate::stdout::say_err!("error: {e:#}");
            verdict_code(Verdict::Incomplete)
        }
    }
}

/// Every image the plan's docker targets run must be on this machine
/// before anything starts: faultline never pulls, and a campaign that would
/// stop at its third target has started two for nothing.
fn images_present(spec: &spec::Spec, plan: &plan::Plan) -> Result<(), String> {
    let images: Vec<(&String, &String)> = spec
        .targets
        .iter()
        .filter(|(name, t)| t.provider == spec::ProviderKind::Docker && plan.cells.iter().any(|c| &c.target == *name))
        .flat_map(|(name, t)| {
            let companions = t.companions.values().filter_map(|c| c.image.as_ref());
            t.image.iter().chain(companions).map(move |image| (name, image))
        })
        .collect();
    if images.is_empty() {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let docker = faultline_docker::Docker::connect().await.map_err(|e| format!("{e:#}"))?;
        for (target, image) in images {
            docker.require_image(image).await.map_err(|e| format!("target `{target}`: {e:#}"))?;
        }
        Ok(())
    })
}

/// `--agents swarm:N` needs this machine's Docker engine to be a swarm
/// manager: known before a run directory is made, as a usage error.
fn swarm_ready(agents: Option<&AgentsArgs>, runtime: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    let Some(AgentsArgs { launcher: crate::agent::launch::Launcher::Swarm(_), .. }) = agents else { return Ok(()) };
    runtime.block_on(async { faultline_docker::Docker::connect().await?.require_swarm_manager().await })
}

/// The run's agent key: the file given, or (`local`, `swarm`) a new one.
/// `wait` needs the file: the agents someone else starts must hold it.
fn agent_key(agents: &AgentsArgs) -> anyhow::Result<crate::agent::link::LinkKey> {
    use crate::agent::link::LinkKey;
    match (&agents.key_file, agents.launcher) {
        (Some(path), _) => LinkKey::read_file(path).context("--agent-key-file"),
        (None, crate::agent::launch::Launcher::Wait(_)) => anyhow::bail!(
            "--agents wait:N needs --agent-key-file FILE, the key the agents you start hold too: make one with \
             `faultline agents key > FILE` (chmod 600), give it to them (`faultline agent --key-file FILE`, or the \
             Secret `faultline agents render --kubernetes` mounts)"
        ),
        (None, _) => LinkKey::generate(),
    }
}

/// Starts (or waits for) the run's agents and hands them the run.
async fn gather_agents(
    args: &RunArgs,
    agents: &AgentsArgs,
    log_dir: &Path,
    run_tag: u32,
    events: &Events,
) -> anyhow::Result<crate::agent::Agents> {
    use crate::agent::launch::{Launched, Launcher};
    let listen = agents.listen.unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("--agent-listen {listen}: cannot listen"))?;
    let address = listener.local_addr()?;
    let key = agent_key(agents)?;
    let launched = match agents.launcher {
        Launcher::Local(n) => Launched::local(n, address, log_dir, &key, events.clone())?,
        Launcher::Swarm(n) => {
            let docker = faultline_docker::Docker::connect().await?;
            docker.require_swarm_manager().await?;
            let run_id = faultline_kind::ledger::run_id(log_dir);
            let labels = faultline_docker::Labels::run(&run_id);
            let image = match &agents.image {
                Some(image) => {
                    docker.require_image(image).await?;
                    image.clone()
                }
                None => {
                    let exe = std::env::current_exe().context("cannot find faultline's own binary")?;
                    let sha = provenance::sha256_of(&exe);
                    docker.agent_image(&exe, &sha, &agents.base, &labels).await?
                }
            };
            // On the host's network, an agent on this node reaches a listener
            // on any address here through the loopback.
            let connect = match address.ip().is_unspecified() {
                true => std::net::SocketAddr::from(([127, 0, 0, 1], address.port())),
                false => address,
            };
            let name: String = format!("faultline-agents-{run_id}").chars().take(63).collect();
            let service =
                docker.start_agent_service(&name, &image, n, &connect.to_string(), &key.to_hex(), &labels).await?;
            events.say(&format!("swarm service `{name}`: {n} agents of image `{image}`"));
            Launched::swarm(docker, service, log_dir, events.clone())
        }
        Launcher::Wait(n) => {
            events.say(&format!(
                "waiting for {n} agents: faultline agent --connect HOST:{} --key-file <the --agent-key-file>",
                address.port()
            ));
            Launched::none(agents.launcher, events.clone())
        }
    };
    let share = crate::agent::RunShare {
        spec_path: args.spec.display().to_string(),
        spec_text: std::fs::read_to_string(&args.spec).with_context(|| format!("reading {}", args.spec.display()))?,
        set: args.set.clone(),
        quick: args.quick,
        only: args.only.clone(),
        run_tag,
        load_threads: args.load_threads,
    };
    let gathered = crate::agent::Agents::gather(listener, launched, share, &key).await?;
    for a in gathered.infos() {
        let clock = match a.same_clock {
            true => "this host's clock".to_string(),
            false => format!("clock offset {:.0} µs ± {:.0} µs", a.clock_offset_us, a.clock_uncertainty_us),
        };
        events.say(&format!("agent {} on {} (pid {}): {clock}", a.name, a.host, a.pid));
    }
    Ok(gathered)
}

fn verdict_code(v: Verdict) -> u8 {
    v.exit_code() as u8
}

/// Where the run's report and JUnit go, both checked before anything runs.
#[derive(Clone, Copy)]
struct Outputs<'a> {
    template: Option<&'a Path>,
    junit: Option<&'a report::section::Destination>,
}

/// The pipeline: a run directory, the cells run by the engine, what
/// faultline-judge makes of them, results.json, then the report and CI
/// outputs. Exit code: the verdict's.
fn execute(
    args: &RunArgs,
    loaded: &spec::LoadedSpec,
    plan: &plan::Plan,
    outputs: Outputs<'_>,
    plugins: &SpecPlugins,
    runtime: &tokio::runtime::Runtime,
    signals: StopSignals,
) -> anyhow::Result<u8> {
    let spec = &loaded.spec;
    let started = now_text();
    let dirs = RunDirs::create(&args.out, loaded)?;
    let events = crate::console::Console::events(Some(&dirs.run.join("run.log")))?;
    events.say(&format!(
        "faultline {}: {} cells, about {} of load; run directory {}",
        spec.name,
        plan.cells.len(),
        faultline_model::units::format_duration(plan.total_time()),
        dirs.run.display()
    ));
    // Started and ended outside the runtime: ending them joins their threads.
    let load_threads = LoadThreads::start(args.load_threads.unwrap_or_else(LoadThreads::default_count))?;
    let place = Places { dirs: &dirs, events: &events, load_threads: &load_threads };
    let (outcome, agents) = runtime.block_on(run_cells(args, spec, plan, plugins, place, signals))?;
    // Every target is down: what the run created is removed, or kept on purpose.
    if let Err(e) = faultline_kind::ledger::close() {
        events.warn(&format!("{e:#}"));
    }
    let facts =
        RunFacts { subset_reasons: &plan.subset_reasons, errors: &outcome.errors, interrupted: outcome.interrupted };
    let judged = faultline_judge::judge(spec, &outcome.cells, plugins, facts);
    let results = results_of(args, spec, &dirs.run, started, outcome, judged, agents);
    results.write_atomically(&dirs.run.join("results.json"))?;
    write_outputs(&results, &dirs.run, outputs, spec, &events);
    Ok(verdict_code(results.verdict))
}

/// A run's directory and the folders in it.
struct RunDirs {
    run: PathBuf,
    logs: PathBuf,
    history: PathBuf,
}

impl RunDirs {
    /// A new run directory under `out`, with its logs/ folder, its run
    /// ledger opened and the spec as run written into it.
    fn create(out: &Path, loaded: &spec::LoadedSpec) -> anyhow::Result<RunDirs> {
        let run = create_run_dir(out, &loaded.spec.name)?;
        let logs = run.join("logs");
        std::fs::create_dir_all(&logs)?;
        faultline_kind::ledger::open(&faultline_kind::ledger::run_id(&logs), &run);
        std::fs::write(run.join("spec.yaml"), crate::redact::text(&loaded.resolved_text).as_bytes())?;
        Ok(RunDirs { history: run.join("history"), run, logs })
    }
}

/// Where a run's cells run and say what happens: its directories, the
/// console, the load threads.
#[derive(Clone, Copy)]
struct Places<'a> {
    dirs: &'a RunDirs,
    events: &'a Events,
    load_threads: &'a LoadThreads,
}

/// Runs the plan's cells (on agents, when asked), stopping on a signal.
async fn run_cells(
    args: &RunArgs,
    spec: &spec::Spec,
    plan: &plan::Plan,
    plugins: &SpecPlugins,
    Places { dirs, events, load_threads }: Places<'_>,
    signals: StopSignals,
) -> anyhow::Result<(faultline_engine::EngineOutcome, Vec<AgentInfo>)> {
    let cancel = CancellationToken::new();
    let run_tag = run_tag();
    let signals = tokio::spawn(cancel_on_signal(signals, cancel.clone(), events.clone()));
    for warning in crate::leftovers::warnings().await {
        crate::stdout::say_err!("{warning}");
    }
    let agents = match &args.agents {
        Some(a) => {
            let gathering = gather_agents(args, a, &dirs.logs, run_tag, events);
            let gathered = tokio::select! {
                g = gathering => g,
                _ = cancel.cancelled() => Err(anyhow::anyhow!("interrupted while the agents joined")),
            };
            match gathered {
                Ok(agents) => Some(agents),
                Err(e) => {
                    signals.abort();
                    return Err(e);
                }
            }
        }
        None => None,
    };
    let engine = Engine {
        spec,
        plan,
        run_dir: &dirs.run,
        log_dir: &dirs.logs,
        history_dir: &dirs.history,
        run_tag,
        cancel: cancel.clone(),
        events: events.clone(),
        plugins,
        load_threads,
        kinds: &crate::kinds::CATALOG,
        place: agents.as_ref().map_or(Place::Alone, Place::Coordinator),
    };
    let outcome = engine.run().await;
    let infos = agents.as_ref().map(|a| a.infos()).unwrap_or_default();
    if let Some(agents) = agents {
        agents.shut_down().await;
    }
    signals.abort();
    Ok((outcome, infos))
}

/// results.json's content: the run, what was measured, what it was judged.
fn results_of(
    args: &RunArgs,
    spec: &spec::Spec,
    run_dir: &Path,
    started: String,
    outcome: faultline_engine::EngineOutcome,
    judged: faultline_judge::Judged,
    agents: Vec<AgentInfo>,
) -> Results {
    Results {
        schema_version: SCHEMA_VERSION,
        run: RunInfo {
            id: run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            name: spec.name.clone(),
            description: spec.description.clone(),
            // Absolute, so `faultline report` finds the spec's template from anywhere.
            spec_path: std::fs::canonicalize(&args.spec).unwrap_or_else(|_| args.spec.clone()).display().to_string(),
            started,
            finished: now_text(),
            seed: spec.seed,
            params: spec.params.clone(),
            quick: args.quick,
            only: args.only.clone(),
            interrupted: outcome.interrupted,
            faultline_version: env!("CARGO_PKG_VERSION").to_string(),
            faultline_commit: provenance::COMMIT.to_string(),
            host: host_info(),
            agents,
        },
        verdict: judged.verdict,
        verdict_reasons: judged.verdict_reasons,
        gates: judged.gates,
        targets: outcome.targets,
        comparisons: judged.comparisons,
        manifest: provenance::manifest(spec, &args.spec),
        crash_recovery: judged.crash_recovery,
        cells: outcome.cells,
        errors: outcome.errors,
    }
}

/// The console's last lines, the report, JUnit and the CI step summary.
/// The verdict stands even if one of them cannot be written: each says so.
fn write_outputs(results: &Results, run_dir: &Path, outputs: Outputs<'_>, spec: &spec::Spec, events: &Events) {
    for e in &results.errors {
        events.say(&format!("error: {e}"));
    }
    for g in &results.gates {
        let outcome = format!("{:?}", g.result).to_uppercase();
        events.say(&format!("gate {:<24} {outcome:<10} {}", g.name, g.evidence));
    }
    crate::stdout::say!("verdict: {} ({})", results.verdict.as_str(), results.verdict_reasons.join("; "));
    crate::stdout::say!("results: {}", run_dir.join("results.json").display());
    let report_path = run_dir.join("report.md");
    match report::write_run_report(results, run_dir, outputs.template, spec.report.title.as_deref()) {
        Ok(path) => crate::stdout::say!("report:  {}", path.display()),
        Err(e) => crate::stdout::say_err!("error: no report: {e:#}"),
    }
    if let Some(file) = outputs.junit {
        match file.replace(&crate::redact::text(&report::junit::render(results))) {
            Ok(_) => crate::stdout::say!("junit:   {}", file.path.display()),
            Err(e) => crate::stdout::say_err!("error: cannot write the JUnit file {}: {e:#}", file.path.display()),
        }
    }
    if let Err(e) = report::step_summary::append_if_asked(results, &report_path) {
        crate::stdout::say_err!("error: {e:#}");
    }
    // What the servers wrote (their logs) may quote a credential too.
    crate::redact::sweep(run_dir);
}

/// SIGINT and SIGTERM, caught from the moment they are installed; one that
/// comes before the run listens is kept for it.
pub struct StopSignals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn install(runtime: &tokio::runtime::Runtime) -> std::io::Result<StopSignals> {
        use tokio::signal::unix::{signal, SignalKind};
        let _in = runtime.enter();
        Ok(StopSignals { int: signal(SignalKind::interrupt())?, term: signal(SignalKind::terminate())? })
    }
}

/// First SIGINT or SIGTERM: stop the load, keep what was measured.
async fn cancel_on_signal(mut signals: StopSignals, cancel: CancellationToken, events: Events) {
    let name = tokio::select! {
        _ = signals.int.recv() => "SIGINT",
        _ = signals.term.recv() => "SIGTERM",
    };
    // Cancel first: telling the user may fail (a closed stderr) and must not stop it.
    cancel.cancel();
    events.say(&format!("{name}: stopping the load and cleaning up; partial results will be INCOMPLETE"));
}

fn create_run_dir(out: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let safe: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect();
    let stamp = time::OffsetDateTime::now_utc()
        .format(time::macros::format_description!("[year][month][day]-[hour][minute][second]"))
        .expect("static format");
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    for n in 0.. {
        let dir = out.join(if n == 0 { format!("{safe}-{stamp}") } else { format!("{safe}-{stamp}-{n}") });
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    unreachable!("some suffix is free")
}

fn now_text() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .expect("RFC 3339 formats any time")
}

/// `faultline report RUN_DIR`: render again from results.json, with the given
/// template or else the one the spec as run names; into a section of
/// another document when `into` names it and the section.
/// Where `report --into` writes: section `name` of `document`, added when
/// absent only if the document has no other section or `new` says so.
pub struct Section<'a> {
    pub document: &'a Path,
    pub name: &'a str,
    pub new: bool,
}

pub fn rerender(run_dir: &Path, template: Option<&Path>, into: Option<Section>) -> anyhow::Result<String> {
    let run_dir = &crate::run_dir::resolve(run_dir)?;
    let results = Results::read(&run_dir.join("results.json"))?;
    let spec_text = crate::input_file::read_to_string(&run_dir.join("spec.yaml"), spec::limits::MAX_SPEC_BYTES as u64)
        .unwrap_or_default();
    let report_spec: spec::ReportSpec = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&spec_text)
        .ok()
        .and_then(|v| v.get("report").cloned())
        .and_then(|r| serde_yaml_ng::from_value(r).ok())
        .unwrap_or_default();
    let spec_dir = Path::new(&results.run.spec_path).parent().unwrap_or(Path::new(".")).to_path_buf();
    let title = report_spec.title.as_deref();
    match into {
        // The spec's template is for report.md; a section takes the
        // built-in section template unless one is given.
        Some(Section { document, name, new }) => {
            let changed = report::write_section(&results, document, (name, new), template, title)?;
            Ok(format!("section {name} of {}: {}", document.display(), if changed { "written" } else { "unchanged" }))
        }
        None => {
            let template = template.map(Path::to_path_buf).or(report_spec.template.map(|t| spec_dir.join(t)));
            let path = report::write_run_report(&results, run_dir, template.as_deref(), title)?;
            Ok(format!("report: {}", path.display()))
        }
    }
}

/// `faultline history export RUN_DIR`: every recorded cell, one file each.
pub fn export(run_dir: &Path, format: faultline_check::history::export::Format) -> anyhow::Result<()> {
    let root = run_dir.join("history");
    let mut cells: Vec<PathBuf> = std::fs::read_dir(&root)
        .with_context(|| format!("{} has no recorded history (the spec named no checkers)", run_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    cells.sort();
    let extension = match format {
        faultline_check::history::export::Format::Edn => "edn",
        faultline_check::history::export::Format::Json => "json",
    };
    for cell in cells {
        let path = cell.with_extension(extension);
        let mut out = std::io::BufWriter::new(
            std::fs::File::create(&path).with_context(|| format!("cannot create {}", path.display()))?,
        );
        let ops = faultline_check::history::export::export(&cell, format, &mut out)?;
        std::io::Write::flush(&mut out)?;
        crate::stdout::say!("{}: {ops} ops", path.display());
    }
    Ok(())
}

/// A tag that differs from run to run (time and process id mixed).
fn run_tag() -> u32 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mixed = (nanos ^ ((std::process::id() as u64) << 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> 32) as u32
}
