//! Runs a scenario's probes (see [`crate::spec::probe`]): a shell command
//! with the target's `{port}`, `{pid}`, `{uri}`, `{target_dir}` and
//! `{run_dir}` filled in, its output (stdout and stderr) saved in the run
//! directory. A probe that cannot run here — the program is missing, ptrace
//! is not permitted, the target has no pid — is recorded as `unavailable`
//! with the reason, and one that fails or prints nothing as `failed`: never
//! an empty result that reads as "nothing happened". `strace -c` tables are
//! read into per-syscall counts; the report (faultline-report) renders them.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::provider::RunningTarget;
use crate::spec::probe::ProbeSpec;
use faultline_model::probes::ProbeWhen;

/// How long a `start`, `before` or `after` probe may run.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a window probe gets to print its summary after SIGINT.
const WINDOW_GRACE: Duration = Duration::from_secs(5);
/// The most output kept inline in results.json (the file has all of it).
const INLINE_OUTPUT: usize = 4096;

use faultline_model::probes::{ProbeOutput, ProbeStatus, SyscallCount};

/// Where a probe runs: the instance's name and what fills its placeholders.
pub struct ProbeTarget<'a> {
    pub instance: &'a str,
    pub target: &'a RunningTarget,
    pub run_dir: &'a Path,
}

impl ProbeTarget<'_> {
    /// The command with the placeholders filled in, or why it cannot run.
    fn command(&self, probe: &ProbeSpec) -> Result<String, String> {
        let t = self.target;
        let work_dir = t.provided().work_dir().map(|d| d.display().to_string());
        let fills: [(&str, Option<String>, &str); 5] = [
            (
                "{pid}",
                t.provided().pid().map(|p| p.to_string()),
                "the target has no process of faultline's (it is not a process target, or it is not running)",
            ),
            ("{port}", t.port.map(|p| p.to_string()), "faultline does not know the target's port"),
            ("{uri}", Some(t.uri.clone()), ""),
            ("{target_dir}", work_dir, "only process targets have a working directory"),
            (
                "{run_dir}",
                std::path::absolute(self.run_dir).ok().map(|d| d.display().to_string()),
                "it has no absolute path",
            ),
        ];
        let mut command = probe.run.clone();
        for (placeholder, value, missing) in fills {
            if command.contains(placeholder) {
                match value {
                    Some(v) => command = command.replace(placeholder, &v),
                    None => return Err(format!("no {placeholder}: {missing}")),
                }
            }
        }
        Ok(command)
    }

    fn output_path(&self, probe: &ProbeSpec, cell: Option<usize>) -> (PathBuf, String) {
        let instance = faultline_model::labels::instance_file_name(self.instance);
        let name = match cell {
            Some(i) => format!("probes/{:03}-{}-{}-{}.txt", i + 1, instance, probe.name, probe.when.as_str()),
            None => format!("probes/{instance}-{}-start.txt", probe.name),
        };
        (self.run_dir.join(&name), name)
    }

    fn record(&self, probe: &ProbeSpec, command: &str) -> ProbeOutput {
        ProbeOutput {
            name: probe.name.clone(),
            when: probe.when,
            target: self.instance.to_string(),
            command: command.to_string(),
            status: ProbeStatus::Ok,
            note: String::new(),
            file: String::new(),
            output: String::new(),
            syscalls: Vec::new(),
        }
    }

    /// Runs a `start`, `before` or `after` probe to its end (at most 30 s).
    /// `cell` is the cell's index in the plan (None for `start`).
    pub async fn run(&self, probe: &ProbeSpec, cell: Option<usize>) -> ProbeOutput {
        let started = match self.spawn(probe, cell) {
            Ok(s) => s,
            Err(out) => return *out,
        };
        let Started { mut child, mut record, path } = started;
        let status = match tokio::time::timeout(PROBE_TIMEOUT, child.wait()).await {
            Ok(Ok(status)) => Some(status),
            Ok(Err(_)) => None,
            Err(_) => {
                let _ = child.kill().await;
                record.status = ProbeStatus::Failed;
                record.note = format!("still running after {}s: stopped", PROBE_TIMEOUT.as_secs());
                None
            }
        };
        finish(&mut record, &path, status, probe.when == ProbeWhen::Start);
        record
    }

    /// Starts a window probe; [`WindowProbe::stop`] ends it.
    pub fn start_window(&self, probe: &ProbeSpec, cell: usize) -> Result<WindowProbe, Box<ProbeOutput>> {
        let Started { child, record, path } = self.spawn(probe, Some(cell))?;
        Ok(WindowProbe { child, record, path })
    }

    fn spawn(&self, probe: &ProbeSpec, cell: Option<usize>) -> Result<Started, Box<ProbeOutput>> {
        let command = match self.command(probe) {
            Ok(c) => c,
            Err(why) => {
                let mut record = self.record(probe, &probe.run);
                record.status = ProbeStatus::Unavailable;
                record.note = why;
                return Err(Box::new(record));
            }
        };
        let mut record = self.record(probe, &command);
        let (path, relative) = self.output_path(probe, cell);
        record.file = relative;
        let opened = std::fs::create_dir_all(path.parent().unwrap_or(self.run_dir))
            .and_then(|_| std::fs::File::create(&path))
            .and_then(|f| Ok((f.try_clone()?, f)));
        let (out, err) = match opened {
            Ok(files) => files,
            Err(e) => {
                record.status = ProbeStatus::Failed;
                record.note = format!("cannot create {}: {e}", path.display());
                return Err(Box::new(record));
            }
        };
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(&command).stdin(Stdio::null()).stdout(out).stderr(err).kill_on_drop(true);
        // Its own process group, so SIGINT reaches a pipeline's every process.
        cmd.process_group(0);
        match cmd.spawn() {
            Ok(child) => Ok(Started { child, record, path }),
            Err(e) => {
                record.status = ProbeStatus::Unavailable;
                record.note = format!("cannot run sh: {e}");
                Err(Box::new(record))
            }
        }
    }
}

struct Started {
    child: Child,
    record: ProbeOutput,
    path: PathBuf,
}

/// A probe running over the measured window.
pub struct WindowProbe {
    child: Child,
    record: ProbeOutput,
    path: PathBuf,
}

impl WindowProbe {
    /// SIGINT to its process group (strace -c prints its table on it), then
    /// SIGKILL if it has not ended after a grace period.
    pub async fn stop(mut self) -> ProbeOutput {
        let ended_early = self.child.try_wait().ok().flatten();
        let status = match ended_early {
            Some(status) => Some(status),
            None => {
                if let Some(pid) = self.child.id() {
                    let _ = crate::provider::process_group::signal(pid as i32, libc::SIGINT);
                }
                match tokio::time::timeout(WINDOW_GRACE, self.child.wait()).await {
                    Ok(Ok(_)) => None,
                    _ => {
                        if let Some(pid) = self.child.id() {
                            let _ = crate::provider::process_group::signal(pid as i32, libc::SIGKILL);
                        }
                        let _ = self.child.wait().await;
                        self.record.note = format!("did not end {}s after SIGINT: killed", WINDOW_GRACE.as_secs());
                        None
                    }
                }
            }
        };
        // Ended by our SIGINT: its exit status says nothing; its output does.
        finish(&mut self.record, &self.path, status.filter(|_| ended_early.is_some()), false);
        if ended_early.is_some() && self.record.status == ProbeStatus::Ok {
            self.record.note = "ended before the window did".into();
        }
        self.record
    }
}

/// Judges a finished probe by its exit status (None: not known or not
/// meaningful) and output.
fn finish(record: &mut ProbeOutput, path: &Path, status: Option<std::process::ExitStatus>, inline: bool) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let first_line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_string();
    let ptrace_denied = text.contains("ptrace") && (text.contains("Operation not permitted") || text.contains("EPERM"));
    if record.status != ProbeStatus::Ok {
        // Already judged (timed out).
    } else if status.and_then(|s| s.code()) == Some(127) {
        record.status = ProbeStatus::Unavailable;
        record.note = format!("command not found: {first_line}");
    } else if ptrace_denied {
        record.status = ProbeStatus::Unavailable;
        record.note = format!("no ptrace permission: {first_line}");
    } else if let Some(code) = status.filter(|s| !s.success()).map(|s| s.code().unwrap_or(-1)) {
        record.status = ProbeStatus::Failed;
        record.note = format!("exit {code}: {first_line}");
    } else if text.trim().is_empty() {
        record.status = ProbeStatus::Failed;
        record.note = "printed nothing".into();
    }
    record.syscalls = strace_table(&text);
    if inline {
        let mut end = text.len().min(INLINE_OUTPUT);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        record.output = text[..end].to_string();
    }
}

/// The rows of an `strace -c` table (`% time seconds usecs/call calls
/// errors syscall`), most calls first; empty when the text has none.
pub fn strace_table(text: &str) -> Vec<SyscallCount> {
    let mut rows = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("% time") {
            inside = true;
            continue;
        }
        if !inside || trimmed.starts_with("------") {
            continue;
        }
        let fields: Vec<&str> = trimmed.split_whitespace().collect();
        // 5 fields without errors, 6 with.
        let (calls, errors) = match fields.len() {
            5 => (fields[3], "0"),
            6 => (fields[3], fields[4]),
            _ => continue,
        };
        let syscall = fields[fields.len() - 1];
        if syscall == "total" {
            inside = false;
            continue;
        }
        if let (Ok(calls), Ok(errors)) = (calls.parse(), errors.parse()) {
            rows.push(SyscallCount { syscall: syscall.to_string(), calls, errors });
        }
    }
    rows.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.syscall.cmp(&b.syscall)));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_strace_count_table() {
        let text = "strace: Process 4242 attached with 5 threads\n\
            strace: Process 4242 detached\n\
            % time     seconds  usecs/call     calls    errors syscall\n\
            ------ ----------- ----------- --------- --------- ----------------\n\
             61.20    0.120000           0    149718           futex\n\
             30.00    0.060000           1     42000        12 write\n\
              8.80    0.010000           1      96           epoll_wait\n\
            ------ ----------- ----------- --------- --------- ----------------\n\
            100.00    0.190000           0    191814        12 total\n";
        let rows = strace_table(text);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0], SyscallCount { syscall: "futex".into(), calls: 149_718, errors: 0 });
        assert_eq!(rows[1], SyscallCount { syscall: "write".into(), calls: 42_000, errors: 12 });
        assert!(strace_table("no table here\n").is_empty());
    }
}
