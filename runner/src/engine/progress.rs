//! What a person watching a run sees: a live status line on a terminal, plain
//! periodic lines elsewhere (CI logs).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::metrics::LiveCounters;
use crate::spec::units::format_duration;

#[derive(Clone)]
pub struct Progress {
    bar: Option<ProgressBar>,
    plain_every: Duration,
    /// The run's log file: every line shown also lands here.
    log: Option<Arc<Mutex<std::fs::File>>>,
}

impl Progress {
    pub fn new(log_path: Option<PathBuf>) -> std::io::Result<Progress> {
        let log = match log_path {
            Some(p) => Some(Arc::new(Mutex::new(std::fs::File::create(p)?))),
            None => None,
        };
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(1000);
            bar.set_style(
                ProgressStyle::with_template("{prefix:.bold} [{bar:24}] {msg}")
                    .expect("static template")
                    .progress_chars("=> "),
            );
            bar
        });
        Ok(Progress { bar, plain_every: Duration::from_secs(5), log })
    }

    /// A line above the live display (or a plain line).
    pub fn println(&self, line: &str) {
        let line = &crate::redact::text(line);
        if let Some(log) = &self.log {
            let mut file = log.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(file, "{line}");
        }
        match &self.bar {
            Some(bar) => bar.println(line),
            None => stderr_line(line),
        }
    }

    /// Reports one cell's progress until the returned task is aborted. The
    /// counts shown are the measured window's, the very numbers its result
    /// will hold; during warm-up only the rate moves.
    #[allow(clippy::too_many_arguments)]
    pub fn watch_cell(
        &self,
        position: (usize, usize),
        label: String,
        live: Vec<Arc<LiveCounters>>,
        started: Instant,
        warmup: Duration,
        window: Duration,
        remaining_after: Duration,
    ) -> JoinHandle<()> {
        let this = self.clone();
        let length = warmup + window;
        tokio::spawn(async move {
            let every = if this.bar.is_some() { Duration::from_millis(250) } else { this.plain_every };
            let mut last = (Instant::now(), 0u64);
            let mut ticker = tokio::time::interval(every);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let (ok, failed, warm) = live.iter().fold((0, 0, 0), |(o, f, w), c| {
                    let (a, b, d) = c.snapshot();
                    (o + a, f + b, w + d)
                });
                let now = Instant::now();
                let done = ok + failed + warm;
                let rate = done.saturating_sub(last.1) as f64 / (now - last.0).as_secs_f64().max(1e-3);
                last = (now, done);
                let elapsed = now.saturating_duration_since(started).min(length);
                let left = length - elapsed + remaining_after;
                let phase = match elapsed < warmup {
                    true => "warm-up".to_string(),
                    false => format!("{} errors", failed),
                };
                let msg = format!(
                    "{} {:.0} ops/s, {}, {}s/{} ({}s left in run)",
                    label,
                    rate,
                    phase,
                    elapsed.as_secs(),
                    format_duration(length),
                    left.as_secs(),
                );
                match &this.bar {
                    Some(bar) => {
                        bar.set_prefix(format!("cell {}/{}", position.0, position.1));
                        bar.set_position((elapsed.as_secs_f64() / length.as_secs_f64().max(1e-3) * 1000.0) as u64);
                        bar.set_message(msg);
                    }
                    None => stderr_line(&format!("[cell {}/{}] {msg}", position.0, position.1)),
                }
            }
        })
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Like `eprintln!`, but a closed stderr (the reader went away) is not a panic:
/// the run goes on and cleans up.
fn stderr_line(line: &str) {
    let _ = writeln!(std::io::stderr(), "{}", crate::redact::text(line));
}
