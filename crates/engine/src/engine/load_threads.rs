//! Threads of their own for the pipelined lanes, each a single-threaded
//! tokio runtime, the way memtier_benchmark runs its `-t` threads: a lane
//! never migrates, its socket, timer and wake-ups stay on one core, and no
//! worker is woken to steal work. On the 2-core machines this project
//! measures on, the multi-threaded runtime's work stealing woke its second
//! worker on every burst of replies (futex calls per op) and preempted the
//! server on the other core. The request/response lanes (official drivers
//! with pools and background tasks of their own) stay on the main runtime.

use std::future::Future;

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub struct LoadThreads {
    handles: Vec<Handle>,
    stops: Vec<oneshot::Sender<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// The most load threads a run (or an agent) starts: the CLI's bound.
pub const MAX_LOAD_THREADS: usize = 256;

impl LoadThreads {
    /// The default: half the cores (at least one), so the server under
    /// test keeps the others.
    pub fn default_count() -> usize {
        std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
    }

    /// Starts `count` threads, each running a runtime until dropped.
    pub fn start(count: usize) -> std::io::Result<LoadThreads> {
        let mut threads = LoadThreads { handles: Vec::new(), stops: Vec::new(), threads: Vec::new() };
        for i in 0..count.max(1) {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let (stop, stopped) = oneshot::channel::<()>();
            threads.handles.push(runtime.handle().clone());
            threads.stops.push(stop);
            threads.threads.push(
                std::thread::Builder::new()
                    // Linux keeps 15 bytes of a thread's name, which is
                    // how the client's CPU accounting names it.
                    .name(format!("load-thread-{i}"))
                    .spawn(move || runtime.block_on(async { stopped.await.unwrap_or_default() }))?,
            );
        }
        Ok(threads)
    }

    /// Enters load thread `n`'s runtime, to register a socket with its reactor.
    pub(crate) fn enter(&self, n: usize) -> tokio::runtime::EnterGuard<'_> {
        self.handles[n % self.handles.len()].enter()
    }

    /// Runs `lane` on load thread `n` (modulo their count).
    pub(crate) fn spawn<F>(&self, n: usize, lane: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handles[n % self.handles.len()].spawn(lane)
    }
}

impl Drop for LoadThreads {
    /// Ends every thread; lanes still running there are dropped with it.
    fn drop(&mut self) {
        for stop in self.stops.drain(..) {
            let _ = stop.send(());
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_run_on_their_own_threads_and_report_back() {
        let threads = LoadThreads::start(2).unwrap();
        let main = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let names = main.block_on(futures::future::join_all(
            (0..4).map(|i| threads.spawn(i, async { std::thread::current().name().map(String::from) })),
        ));
        let names: Vec<String> = names.into_iter().map(|n| n.unwrap().unwrap()).collect();
        assert_eq!(names, ["load-thread-0", "load-thread-1", "load-thread-0", "load-thread-1"]);
    }
}
