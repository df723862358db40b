//! faultline: database benchmark-and-fault campaigns from declarative YAML.
//!
//! spec → plan → engine (targets, executors) → metrics → gates → results.json → report
//!
//! A build may leave out plugins and the heavy target kinds (cargo features;
//! the quickstart's `--no-default-features`): code only they use is then
//! unused, so dead code is looked for in the full build only.
#![cfg_attr(not(all(feature = "plugins", feature = "mongodb", feature = "dynamodb")), allow(dead_code))]

mod agents_flag;
mod check;
mod compare;
mod console;
mod kinds;
mod kubernetes;
mod leftovers;
mod redact;
mod run;
mod run_dir;
#[cfg(test)]
mod spec_fuzz;
#[cfg(test)]
mod synthetic_results;
mod teardown;

use faultline_check::{checker, history};
use faultline_engine::{agent, results};
use faultline_model::{input_file, stdout};
use faultline_plugin as plugin;
use faultline_spec as spec;
use faultline_spec::plan;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code for a spec or usage error (0 PASS, 1 FAIL, 2 INCOMPLETE).
pub const EXIT_USAGE: u8 = 3;

#[derive(Parser)]
#[command(name = "faultline", version, about = "Database benchmark-and-fault campaigns from declarative YAML specs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum AgentsCommand {
    /// Print the manifests that start N agents dialing the coordinator
    /// (which waits for them: `faultline run SPEC --agents wait:N
    /// --agent-listen 0.0.0.0:PORT`).
    Render {
        /// Kubernetes: an Indexed Job of N pods (the only orchestrator so far).
        #[arg(long, required = true)]
        kubernetes: bool,
        #[arg(long, value_name = "N")]
        count: u32,
        /// The coordinator's HOST:PORT as the agents reach it.
        #[arg(long, value_name = "HOST:PORT")]
        connect: String,
        /// An image with this very faultline build on its PATH (the
        /// coordinator takes no other build).
        #[arg(long)]
        image: String,
        #[arg(long, default_value = "default")]
        namespace: String,
        /// The Job's name.
        #[arg(long, default_value = "faultline-agents")]
        job: String,
        /// CPU each agent requests and is limited to, in cores.
        #[arg(long)]
        cpu: Option<f64>,
        /// The Kubernetes Secret holding the run's agent key (under the
        /// key `key`), mounted into each pod.
        #[arg(long, default_value = "faultline-agent-key")]
        key_secret: String,
    },
    /// Print a new agent key (64 hex characters): for `--agents wait:N
    /// --agent-key-file FILE` and the agents you start (`faultline agent
    /// --key-file FILE`, or a Kubernetes Secret).
    Key,
}

#[derive(Subcommand)]
enum Command {
    /// Run a campaign: exit 0 PASS, 1 FAIL, 2 INCOMPLETE, 3 spec or usage error.
    Run {
        spec: PathBuf,
        /// Override a param: --set duration=30s (repeatable).
        #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_assignment)]
        set: Vec<(String, String)>,
        /// Shortened timings for development; the verdict is at best INCOMPLETE.
        #[arg(long)]
        quick: bool,
        /// Run only this scenario (repeatable); the verdict is at best INCOMPLETE.
        #[arg(long, value_name = "SCENARIO")]
        only: Vec<String>,
        /// Where run directories go.
        #[arg(long, default_value = "runs")]
        out: PathBuf,
        /// Print the expanded plan and exit without running anything.
        #[arg(long)]
        dry_run: bool,
        /// Also write the verdict as JUnit XML: a testcase per gate and cell.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// Threads that run the pipelined (Redis) load, each a runtime of
        /// its own as memtier's threads (default: half the cores).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
        load_threads: Option<u16>,
        /// Run the load on agents: `local:N` starts N agent processes here,
        /// `swarm:N` a Docker Swarm service of N agents, `wait:N` waits for N
        /// agents started elsewhere (`faultline agent --connect`). Faults,
        /// checkers and gates stay here.
        #[arg(long, value_name = "LAUNCHER:N", value_parser = agents_flag::parse)]
        agents: Option<agent::launch::Launcher>,
        /// Where agents dial in (default 127.0.0.1 on a free port for
        /// `local`; `wait` needs an address they can reach, e.g. 0.0.0.0:7600).
        #[arg(long, value_name = "ADDR:PORT", requires = "agents")]
        agent_listen: Option<std::net::SocketAddr>,
        /// The run's agent key (`faultline agents key > FILE`): needed by
        /// `wait`, whose agents hold it too; `local` and `swarm` make one
        /// per run when it is not given.
        #[arg(long, value_name = "FILE", requires = "agents")]
        agent_key_file: Option<PathBuf>,
        /// `swarm`: the agents' image, with this very faultline build on
        /// its PATH (default: `faultline/agent:<digest>`, made here from
        /// --agent-base and this binary).
        #[arg(long, value_name = "IMAGE", requires = "agents")]
        agent_image: Option<String>,
        /// `swarm`: the local image the agents' image is made from.
        #[arg(long, value_name = "IMAGE", default_value = agent::launch::DEFAULT_AGENT_BASE, requires = "agents")]
        agent_base: String,
    },
    /// Run one agent of a run on agents: dial the coordinator (`faultline
    /// run --agents`), run its share of every cell's load, and send back
    /// what it measured. Exit 0 when the coordinator says goodbye.
    Agent {
        /// The coordinator's address (its --agent-listen).
        #[arg(long, value_name = "HOST:PORT")]
        connect: String,
        /// This agent's name in results (default: host-pid).
        #[arg(long)]
        name: Option<String>,
        /// The run's agent key (default: the file named by
        /// FAULTLINE_AGENT_KEY_FILE, else FAULTLINE_AGENT_KEY's 64 hex
        /// characters). Never give the key itself on a command line.
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
    },
    /// What runs agents elsewhere: manifests for an orchestrator.
    Agents {
        #[command(subcommand)]
        command: AgentsCommand,
    },
    /// Check a spec without running it.
    Validate {
        spec: PathBuf,
        #[arg(long = "set", value_name = "NAME=VALUE", value_parser = parse_assignment)]
        set: Vec<(String, String)>,
    },
    /// Re-render a run's report (and charts) from its results.json, or
    /// write it as a section of another document.
    Report {
        run_dir: PathBuf,
        /// A minijinja template instead of the default one (or the spec's).
        #[arg(long)]
        template: Option<PathBuf>,
        /// Write the report into this file, between the markers
        /// <!-- faultline:begin NAME --> and <!-- faultline:end NAME -->
        /// (appended when absent); nothing else in it changes. Charts go to
        /// NAME-charts/ beside it.
        #[arg(long, value_name = "FILE", requires = "section")]
        into: Option<PathBuf>,
        /// The section's name (letters, digits, `.`, `_`, `-`).
        #[arg(long, value_name = "NAME", requires = "into")]
        section: Option<String>,
        /// Add the section although the file has others and not this one
        /// (without it that is refused, so a mistyped name never adds a
        /// second copy).
        #[arg(long, requires = "into")]
        new_section: bool,
    },
    /// Compare two runs of the same spec (e.g. the parent commit, then the
    /// candidate): per cell, B / A with a bootstrap interval over the
    /// repeats and a verdict. Markdown on stdout; exit 0 no regression, 1 a
    /// regression beyond the threshold, 3 unreadable or incomparable runs.
    Compare {
        run_a: PathBuf,
        run_b: PathBuf,
        /// Throughput changes within ± this share are noise (e.g. 0.05 for ±5%).
        #[arg(long, default_value_t = faultline_judge::comparison::DEFAULT_PARITY_BAND)]
        threshold: f64,
        /// p50 and p99 changes within ± this share are noise (latency is
        /// noisier than throughput).
        #[arg(long, default_value_t = compare::DEFAULT_LATENCY_THRESHOLD)]
        latency_threshold: f64,
        /// Also write the comparison as JSON.
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
    },
    /// Print the JSON Schema of the spec language.
    Schema,
    /// Recorded operation histories: export them, or time the checkers.
    History {
        #[command(subcommand)]
        command: HistoryCommand,
    },
    /// Remove what killed runs left behind: containers and networks (found by
    /// faultline's labels), DynamoDB tables and data directories (found in
    /// the run ledgers); runs whose faultline is still alive are skipped.
    /// Exit 0 done (or nothing to do), 1 something could not be removed, 3
    /// Docker unreachable (what the ledgers list is removed all the same).
    Teardown {
        /// Only this run's: its run directory's name or path, or its full
        /// `faultline.run` label (see --dry-run).
        #[arg(long, value_name = "RUN_ID")]
        run: Option<String>,
        /// Also remove what a live faultline process is still using.
        #[arg(long)]
        force: bool,
        /// Only list what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
    /// WebAssembly plugins: check that a file is one.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
    /// Check a Jepsen-style EDN history for linearizability: exit 0
    /// linearizable, 1 not, 2 unknown (budget ran out), 3 unreadable input.
    Check {
        /// register: one compare-and-set register; kv: get/put/append per key.
        #[arg(long, value_enum)]
        model: ModelArg,
        file: PathBuf,
        /// Give up (verdict unknown) after this long, reading the file included.
        #[arg(long, default_value = "60s", value_parser = faultline_model::units::parse_duration)]
        budget: std::time::Duration,
        /// Give up (verdict unknown) rather than use more memory than this
        /// (an estimate of the history and the search).
        #[arg(long, default_value = "1GiB", value_parser = faultline_model::units::parse_size)]
        memory: u64,
    },
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Say which world and interface version a .wasm file implements, or why
    /// it is not a faultline plugin: exit 0 valid, 1 not.
    Check { file: PathBuf },
    /// Time a workload plugin per generated op, next to the built-in
    /// zipfian shape (both draw get 80 / set 15 / incr 3 / del 2 over 100k keys).
    Bench {
        file: PathBuf,
        #[arg(long, default_value_t = 10_000_000)]
        ops: u64,
        /// The plugin's config, as JSON.
        #[arg(long, default_value = "{}")]
        config: String,
    },
}

#[derive(Subcommand)]
enum HistoryCommand {
    /// Write each recorded cell of a run as history/<cell>.edn or .json.
    Export {
        run_dir: PathBuf,
        #[arg(long, value_enum, default_value = "edn")]
        format: ExportFormat,
    },
    /// Write a partitioned kv history with a known answer (EDN lines for
    /// `faultline check --model kv`): clients over keys k0, k1, …, an
    /// optional intractable key "hard", and violations on chosen keys.
    GenerateKv {
        out: PathBuf,
        #[arg(long, default_value_t = 50)]
        clients: u64,
        #[arg(long, default_value_t = 20)]
        keys: u64,
        /// Ordinary operations per client.
        #[arg(long, default_value_t = 40)]
        ops: u64,
        /// Concurrent appends on the key "hard" (0: no hard key).
        #[arg(long, default_value_t = 0)]
        hard: u64,
        /// Make a get of key kN read a value no one wrote (repeatable).
        #[arg(long = "violate", value_name = "N")]
        violations: Vec<u64>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
    /// Time the stale-read and lost-write checkers on a generated history.
    Bench {
        #[arg(long, default_value_t = 10_000_000)]
        ops: u64,
        #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
        keys: u64,
    },
}

/// `history export --format`: the command line's name for the check
/// crate's [`history::export::Format`].
#[derive(Clone, Copy, clap::ValueEnum)]
enum ExportFormat {
    /// Jepsen EDN events, one map per line (what `faultline check --model kv` reads).
    Edn,
    /// Porcupine-style JSON: an array of {client_id, input, call, output, return}.
    Json,
}

impl From<ExportFormat> for history::export::Format {
    fn from(format: ExportFormat) -> Self {
        match format {
            ExportFormat::Edn => history::export::Format::Edn,
            ExportFormat::Json => history::export::Format::Json,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ModelArg {
    Register,
    Kv,
}

fn parse_assignment(s: &str) -> Result<(String, String), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("`{s}` is not NAME=VALUE"))?;
    Ok((k.trim().to_string(), v.to_string()))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let code = match cli.command {
        Command::Run {
            spec,
            set,
            quick,
            only,
            out,
            dry_run,
            junit,
            load_threads,
            agents,
            agent_listen,
            agent_key_file,
            agent_image,
            agent_base,
        } => {
            let load_threads = load_threads.map(usize::from);
            let agents = agents.map(|launcher| run::AgentsArgs {
                launcher,
                listen: agent_listen,
                key_file: agent_key_file,
                image: agent_image,
                base: agent_base,
            });
            run::run(run::RunArgs { spec, set, quick, only, out, dry_run, junit, load_threads, agents })
        }
        Command::Agents {
            command: AgentsCommand::Render { kubernetes: _, count, connect, image, namespace, job, cpu, key_secret },
        } => {
            let args = kubernetes::RenderArgs { count, connect, image, namespace, job, cpu, key_secret };
            match kubernetes::render(&args) {
                Ok(yaml) => {
                    crate::stdout::print(&yaml);
                    0
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    EXIT_USAGE
                }
            }
        }
        Command::Agents { command: AgentsCommand::Key } => match agent::link::LinkKey::generate() {
            Ok(key) => {
                crate::stdout::print(&format!("{}\n", key.to_hex()));
                0
            }
            Err(e) => {
                crate::stdout::say_err!("error: {e:#}");
                2
            }
        },
        // 2: the run could not be served (no key, the coordinator refused
        // this agent, or went away mid-run).
        Command::Agent { connect, name, key_file } => {
            let key = agent_key(key_file.as_deref());
            let served = key.and_then(|key| {
                let watcher = console::Console::events(None)?;
                let args = agent::serve::AgentArgs { connect, name, key, events: watcher };
                let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build();
                let runtime = runtime.map_err(|e| anyhow::anyhow!("cannot start a runtime: {e}"))?;
                runtime.block_on(agent::serve::serve(args, &kinds::CATALOG))
            });
            match served {
                Ok(()) => 0,
                Err(e) => {
                    crate::stdout::say_err!("error: {e:#}");
                    2
                }
            }
        }
        Command::Compare { run_a, run_b, threshold, latency_threshold, json } => {
            compare::command(&run_a, &run_b, threshold, latency_threshold, json)
        }
        Command::Validate { spec, set } => {
            match spec::load(&spec, &set, &kinds::CATALOG)
                .and_then(|loaded| plugin::SpecPlugins::load(&spec, &loaded).map(|_| loaded))
            {
                Ok(loaded) => {
                    for warning in loaded.warnings(&spec) {
                        eprintln!("warning: {warning}");
                    }
                    // The plan `run` builds, with its errors: a spec that passes
                    // here is not refused by `run` for its plan.
                    let cells = match plan::build(&loaded, &plan::PlanOptions::default()) {
                        Ok(plan) => plan.cells.len(),
                        Err(e) => {
                            crate::stdout::say_err!("error: {}: {e}", spec.display());
                            return ExitCode::from(EXIT_USAGE);
                        }
                    };
                    let scenarios = loaded.spec.scenarios.len();
                    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
                    crate::stdout::say!(
                        "{}: ok ({}, {})",
                        spec.display(),
                        plural(scenarios, "scenario"),
                        plural(cells, "cell")
                    );
                    0
                }
                Err(e) => {
                    crate::stdout::say_err!("error: {e}");
                    EXIT_USAGE
                }
            }
        }
        Command::Report { run_dir, template, into, section, new_section } => {
            let into = into.zip(section);
            let into = into.as_ref().map(|(f, s)| run::Section { document: f, name: s, new: new_section });
            match run::rerender(&run_dir, template.as_deref(), into) {
                Ok(message) => {
                    crate::stdout::say!("{message}");
                    0
                }
                Err(e) => {
                    crate::stdout::say_err!("error: {e:#}");
                    EXIT_USAGE
                }
            }
        }
        Command::History { command: HistoryCommand::Export { run_dir, format } } => {
            match run::export(&run_dir, format.into()) {
                Ok(()) => 0,
                Err(e) => {
                    crate::stdout::say_err!("error: {e:#}");
                    EXIT_USAGE
                }
            }
        }
        Command::History {
            command: HistoryCommand::GenerateKv { out, clients, keys, ops, hard, violations, seed },
        } => {
            let shape = history::partitioned_kv::Shape { clients, keys, ops_per_client: ops, hard, violations, seed };
            match history::partitioned_kv::generate(&shape)
                .and_then(|text| std::fs::write(&out, text).map_err(|e| format!("cannot write {}: {e}", out.display())))
            {
                Ok(()) => 0,
                Err(e) => {
                    crate::stdout::say_err!("error: {e}");
                    3
                }
            }
        }
        Command::History { command: HistoryCommand::Bench { ops, keys } } => {
            match faultline_check::bench::bench(ops, keys, &mut |line| crate::stdout::say!("{line}")) {
                Ok(()) => 0,
                Err(e) => {
                    crate::stdout::say_err!("error: {e:#}");
                    1
                }
            }
        }
        Command::Check { model, file, budget, memory } => {
            let model = match model {
                ModelArg::Register => checker::linearizability::Model::Register,
                ModelArg::Kv => checker::linearizability::Model::Kv,
            };
            check::run(model, &file, budget, usize::try_from(memory).unwrap_or(usize::MAX))
        }
        Command::Plugin { .. } if !plugin::BUILT_IN => {
            crate::stdout::say_err!("error: {}", plugin::BUILD_WITH_PLUGINS);
            EXIT_USAGE
        }
        Command::Plugin { command } => {
            let done = match command {
                PluginCommand::Check { file } => plugin::check(&file).map(|line| format!("{line}\n")),
                PluginCommand::Bench { file, ops, config } => plugin::bench::run(&file, ops.max(1), &config),
            };
            match done {
                Ok(text) => {
                    crate::stdout::print(&text);
                    0
                }
                Err(e) => {
                    crate::stdout::say_err!("error: {e:#}");
                    1
                }
            }
        }
        Command::Teardown { run, force, dry_run } => teardown::run(teardown::TeardownArgs { run, force, dry_run }),
        Command::Schema => {
            let schema = faultline_spec::schema::of(&kinds::CATALOG);
            crate::stdout::say!("{}", serde_json::to_string_pretty(&schema).expect("schema serializes"));
            0
        }
    };
    ExitCode::from(code)
}

/// An agent's key: `--key-file`, else the environment's (which is removed
/// either way, so nothing the agent starts inherits it).
fn agent_key(key_file: Option<&std::path::Path>) -> anyhow::Result<agent::link::LinkKey> {
    use agent::link::{LinkKey, KEY_ENV, KEY_FILE_ENV};
    if let Some(warning) = key_file.and_then(LinkKey::shared_warning) {
        crate::stdout::say_err!("warning: {warning}");
    }
    LinkKey::for_agent(key_file)?.ok_or_else(|| {
        anyhow::anyhow!(
            "no agent key: give --key-file FILE (or set {KEY_FILE_ENV}=FILE, or {KEY_ENV}), holding the key \
             the coordinator was given with --agent-key-file"
        )
    })
}
