//! What a person watching a run sees, drawn from the engine's events
//! (faultline_engine::events): on a terminal a live status line with the
//! story's lines above it; elsewhere (CI logs) the lines and a plain status
//! line every five seconds. Every line of the story also lands in the run's
//! run.log. Writing to a stderr whose reader went away is not a panic: the
//! run goes on and cleans up.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use faultline_engine::events::{CellProgress, Event, Events, Watcher};
use indicatif::{ProgressBar, ProgressStyle};

/// How often a plain status line is written where there is no terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

pub struct Console {
    bar: Option<ProgressBar>,
    /// The run's log file: every line said also lands here.
    log: Option<Mutex<std::fs::File>>,
    /// The last status shown (the rate shown is over the time since).
    last: Mutex<Option<Shown>>,
}

/// A status line shown: when, of which cell, and its ops answered by then.
#[derive(Clone, Copy)]
struct Shown {
    at: Instant,
    position: (usize, usize),
    answered: u64,
}

impl Console {
    /// Events rendered on stderr, and into `log` when given.
    pub fn events(log: Option<&Path>) -> std::io::Result<Events> {
        Ok(Events::new(Arc::new(Console::new(log)?)))
    }

    fn new(log: Option<&Path>) -> std::io::Result<Console> {
        let log = match log {
            Some(p) => Some(Mutex::new(std::fs::File::create(p)?)),
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
        Ok(Console { bar, log, last: Mutex::new(None) })
    }

    fn line(&self, line: &str) {
        if let Some(log) = &self.log {
            let mut file = log.lock().unwrap_or_else(|e| e.into_inner());
            let _ = writeln!(file, "{line}");
        }
        match &self.bar {
            Some(bar) => bar.println(line),
            None => stderr_line(line),
        }
    }

    fn status(&self, cell: &CellProgress) {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let this = Shown { at: now, position: cell.position, answered: cell.answered };
        let rate = match last.replace(this) {
            // A plain line every PLAIN_EVERY of a cell, the first one
            // PLAIN_EVERY into it; a bar's status at every event.
            Some(shown) if shown.position == cell.position => {
                if self.bar.is_none() && now - shown.at < PLAIN_EVERY {
                    *last = Some(shown);
                    return;
                }
                cell.answered.saturating_sub(shown.answered) as f64 / (now - shown.at).as_secs_f64().max(1e-3)
            }
            _ if self.bar.is_none() => return,
            _ => 0.0,
        };
        let phase = match cell.warming_up {
            true => "warm-up".to_string(),
            false => format!("{} errors", cell.failed),
        };
        let (stage, fraction) = cell.stage();
        let msg = format!("{} {rate:.0} ops/s, {phase}, {stage}", cell.label);
        let (at, of) = cell.position;
        match &self.bar {
            Some(bar) => {
                bar.set_prefix(format!("cell {at}/{of}"));
                bar.set_position((fraction.clamp(0.0, 1.0) * 1000.0) as u64);
                bar.set_message(msg);
            }
            None => stderr_line(&format!("[cell {at}/{of}] {msg}")),
        }
    }
}

impl Watcher for Console {
    fn event(&self, event: Event<'_>) {
        match event {
            Event::Said(line) => self.line(line),
            Event::Warning(line) => self.line(&format!("warning: {line}")),
            Event::Cell(cell) => self.status(cell),
            Event::Finished => {
                if let Some(bar) = &self.bar {
                    bar.finish_and_clear();
                }
            }
        }
    }
}

/// Like `eprintln!`, but a closed stderr (the reader went away) is not a panic.
fn stderr_line(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}
