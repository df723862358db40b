//! What a person watching a run sees: a live status line on a terminal, plain
//! periodic lines elsewhere (CI logs).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::agent::wire::Frame;
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
    /// will hold; during warm-up only the rate moves. A cell of contention
    /// rounds ends when its rounds are answered, not at its duration (a cap):
    /// it shows rounds done of rounds asked instead of a time left.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn watch_cell(
        &self,
        position: (usize, usize),
        label: String,
        live: Vec<Arc<LiveCounters>>,
        started: Instant,
        warmup: Duration,
        window: Duration,
        remaining_after: Duration,
        rounds: Option<Rounds>,
    ) -> JoinHandle<()> {
        let this = self.clone();
        let length = warmup + window;
        tokio::spawn(async move {
            let every = if this.bar.is_some() { Duration::from_millis(250) } else { this.plain_every };
            let mut last = (Instant::now(), 0u64);
            let mut ticker = tokio::time::interval(every);
            ticker.tick().await;
            // Said once, in run.log too, as soon as an op of the measured
            // window was answered: what a test acting on a run mid-window
            // waits for, instead of guessing how long the warm-up took.
            let mut answered = false;
            let mut poll = tokio::time::interval(Duration::from_millis(10));
            loop {
                if answered {
                    ticker.tick().await;
                } else {
                    tokio::select! {
                        _ = ticker.tick() => {}
                        _ = poll.tick() => {
                            if live.iter().any(|c| c.snapshot().0 > 0) {
                                answered = true;
                                let (at, of) = position;
                                this.println(&format!("cell {at}/{of} {label}: measuring, first op answered"));
                            }
                            continue;
                        }
                    }
                }
                let (ok, failed, warm) = live.iter().fold((0, 0, 0), |(o, f, w), c| {
                    let (a, b, d) = c.snapshot();
                    (o + a, f + b, w + d)
                });
                let now = Instant::now();
                let done = ok + failed + warm;
                let rate = done.saturating_sub(last.1) as f64 / (now - last.0).as_secs_f64().max(1e-3);
                last = (now, done);
                let elapsed = now.saturating_duration_since(started).min(length);
                let phase = match elapsed < warmup {
                    true => "warm-up".to_string(),
                    false => format!("{} errors", failed),
                };
                let (msg, fraction) = match rounds {
                    Some(r) => {
                        let (line, fraction) = r.progress(done, elapsed);
                        (format!("{label} {rate:.0} ops/s, {phase}, {line}"), fraction)
                    }
                    None => {
                        let left = length - elapsed + remaining_after;
                        let msg = format!(
                            "{} {:.0} ops/s, {}, {}s/{} ({}s left in run)",
                            label,
                            rate,
                            phase,
                            elapsed.as_secs(),
                            format_duration(length),
                            left.as_secs(),
                        );
                        (msg, elapsed.as_secs_f64() / length.as_secs_f64().max(1e-3))
                    }
                };
                match &this.bar {
                    Some(bar) => {
                        bar.set_prefix(format!("cell {}/{}", position.0, position.1));
                        bar.set_position((fraction.clamp(0.0, 1.0) * 1000.0) as u64);
                        bar.set_message(msg);
                    }
                    None => stderr_line(&format!("[cell {}/{}] {msg}", position.0, position.1)),
                }
            }
        })
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// In an agent: sends its lanes' counts to the coordinator every 50 ms until
/// aborted; the coordinator's progress line adds up every agent's.
pub fn relay(live: Vec<Arc<LiveCounters>>, out: UnboundedSender<Frame>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(Duration::from_millis(50));
        loop {
            ticker.tick().await;
            let (ok, failed, warmup) = live.iter().fold((0, 0, 0), |(o, f, w), c| {
                let (a, b, d) = c.snapshot();
                (o + a, f + b, w + d)
            });
            if out.send(Frame::Progress { ok, failed, warmup }).is_err() {
                return;
            }
        }
    })
}

/// A contention-rounds cell's size: every writer sends one op per round.
#[derive(Debug, Clone, Copy)]
pub struct Rounds {
    /// Rounds the workload asks for (its key count).
    pub asked: u64,
    /// Writers of the cell: clients × in-flight slots.
    pub writers: u64,
}

impl Rounds {
    /// `round 12/63, 4s in` from the ops answered so far (warm-up ones use
    /// up rounds too), and the share of the rounds done.
    fn progress(&self, answered: u64, elapsed: Duration) -> (String, f64) {
        let done = (answered / self.writers.max(1)).min(self.asked);
        let line = format!("round {done}/{} after {}s", self.asked, elapsed.as_secs());
        (line, done as f64 / self.asked.max(1) as f64)
    }
}

/// Like `eprintln!`, but a closed stderr (the reader went away) is not a panic:
/// the run goes on and cleans up.
fn stderr_line(line: &str) {
    let _ = writeln!(std::io::stderr(), "{}", crate::redact::text(line));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_show_rounds_done_of_rounds_asked() {
        let r = Rounds { asked: 63, writers: 32 };
        assert_eq!(r.progress(32 * 12 + 5, Duration::from_secs(4)), ("round 12/63 after 4s".to_string(), 12.0 / 63.0));
        assert_eq!(r.progress(10_000, Duration::from_secs(9)).0, "round 63/63 after 9s");
    }
}
