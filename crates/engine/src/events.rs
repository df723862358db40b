//! What the engine tells whoever watches a run: lines of its story (a cell
//! measuring, a fault applied or healed, a step of a capacity search) and
//! each running cell's live counts. The engine draws nothing and prints
//! nothing: a [`Watcher`] renders the events — the CLI's console (a live
//! status line on a terminal, plain periodic lines elsewhere, every line in
//! run.log), an agent's log, or whatever a library user passes.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::metrics::LiveCounters;

/// Renders what the engine says.
pub trait Watcher: Send + Sync {
    fn event(&self, event: Event<'_>);
}

/// One thing the engine says.
#[derive(Debug)]
pub enum Event<'a> {
    /// A line of the run's story, credentials already redacted.
    Said(&'a str),
    /// A warning that does not stop the run (a leftover it could not
    /// remove, a connection it refused), redacted.
    Warning(&'a str),
    /// A running cell's counts, four times a second.
    Cell(&'a CellProgress),
    /// The run's cells are done: a live display may go.
    Finished,
}

/// Where a running cell stands.
#[derive(Debug, Clone)]
pub struct CellProgress {
    /// This cell's place in the run: (n, of).
    pub position: (usize, usize),
    pub label: String,
    /// Ops answered so far, warm-up included (what a rate is taken of),
    /// and of the measured window's, those that failed.
    pub answered: u64,
    pub failed: u64,
    pub warming_up: bool,
    /// Of the cell's warm-up and window (`length`).
    pub elapsed: Duration,
    pub length: Duration,
    /// How long the cells after this one take.
    pub left_after: Duration,
    /// Contention rounds: the cell ends when its rounds are answered.
    pub rounds: Option<Rounds>,
}

impl CellProgress {
    /// `round 12/63 after 4s` or `3s/10s (40s left in run)`, and the share
    /// of the cell done.
    pub fn stage(&self) -> (String, f64) {
        match self.rounds {
            Some(r) => r.progress(self.answered, self.elapsed),
            None => {
                let left = self.length.saturating_sub(self.elapsed) + self.left_after;
                let line = format!(
                    "{}s/{} ({}s left in run)",
                    self.elapsed.as_secs(),
                    faultline_model::units::format_duration(self.length),
                    left.as_secs()
                );
                (line, self.elapsed.as_secs_f64() / self.length.as_secs_f64().max(1e-3))
            }
        }
    }
}

/// The engine's side of the watcher: what it says goes through here.
#[derive(Clone)]
pub struct Events {
    watcher: Arc<dyn Watcher>,
}

impl Events {
    pub fn new(watcher: Arc<dyn Watcher>) -> Events {
        Events { watcher }
    }

    /// A line of the run's story.
    pub fn say(&self, line: &str) {
        self.watcher.event(Event::Said(&crate::redact::text(line)));
    }

    /// A warning that does not stop the run.
    pub fn warn(&self, line: &str) {
        self.watcher.event(Event::Warning(&crate::redact::text(line)));
    }

    /// Samples one cell's counts until the returned task is aborted. The
    /// counts are the measured window's, the very numbers its result will
    /// hold; during warm-up only the answered count moves.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn watch_cell(
        &self,
        position: (usize, usize),
        label: String,
        live: Vec<Arc<LiveCounters>>,
        started: Instant,
        warmup: Duration,
        window: Duration,
        left_after: Duration,
        rounds: Option<Rounds>,
    ) -> JoinHandle<()> {
        let this = self.clone();
        let length = warmup + window;
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(Duration::from_millis(250));
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
                                this.say(&format!("cell {at}/{of} {label}: measuring, first op answered"));
                            }
                            continue;
                        }
                    }
                }
                let (ok, failed, warm) = live.iter().fold((0, 0, 0), |(o, f, w), c| {
                    let (a, b, d) = c.snapshot();
                    (o + a, f + b, w + d)
                });
                let elapsed = Instant::now().saturating_duration_since(started).min(length);
                let cell = CellProgress {
                    position,
                    label: label.clone(),
                    answered: ok + failed + warm,
                    failed,
                    warming_up: elapsed < warmup,
                    elapsed,
                    length,
                    left_after,
                    rounds,
                };
                this.watcher.event(Event::Cell(&cell));
            }
        })
    }

    pub(crate) fn finish(&self) {
        self.watcher.event(Event::Finished);
    }
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
    /// `round 12/63 after 4s` from the ops answered so far (warm-up ones
    /// use up rounds too), and the share of the rounds done.
    fn progress(&self, answered: u64, elapsed: Duration) -> (String, f64) {
        let done = (answered / self.writers.max(1)).min(self.asked);
        let line = format!("round {done}/{} after {}s", self.asked, elapsed.as_secs());
        (line, done as f64 / self.asked.max(1) as f64)
    }
}

/// Events kept in memory, for the engine's tests.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct Recorded {
    pub lines: std::sync::Mutex<Vec<String>>,
}

#[cfg(test)]
impl Watcher for Recorded {
    fn event(&self, event: Event<'_>) {
        let line = match event {
            Event::Said(line) => line.to_string(),
            Event::Warning(line) => format!("warning: {line}"),
            Event::Cell(_) | Event::Finished => return,
        };
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
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

    #[test]
    fn a_cell_says_where_it_stands_in_the_run() {
        let cell = CellProgress {
            position: (2, 5),
            label: "s/p".into(),
            answered: 10,
            failed: 0,
            warming_up: false,
            elapsed: Duration::from_secs(3),
            length: Duration::from_secs(10),
            left_after: Duration::from_secs(33),
            rounds: None,
        };
        assert_eq!(cell.stage(), ("3s/10s (40s left in run)".to_string(), 0.3));
    }

    #[test]
    fn what_is_said_is_redacted_before_any_watcher_sees_it() {
        let recorded = Arc::new(Recorded::default());
        let events = Events::new(recorded.clone());
        events.say("dialing redis://user:hunter2@h:1");
        events.warn("could not remove x");
        let lines = recorded.lines.lock().unwrap().clone();
        assert!(!lines[0].contains("hunter2"), "{lines:?}");
        assert_eq!(lines[1], "warning: could not remove x");
    }
}
