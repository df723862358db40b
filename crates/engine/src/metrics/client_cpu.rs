//! faultline's own CPU over a cell's measured window, from the kernel's
//! run time of each of its threads (`/proc/self/task/*/schedstat`, in
//! nanoseconds). It is what tells a target's limit from the load
//! generator's: a load thread near one whole core, or every core of the
//! host busy, means the numbers are faultline's ceiling, not the target's.

use std::collections::HashMap;
use std::time::Instant;

use faultline_model::stats::ClientCpu;

/// Each thread's run time at one instant.
pub struct Sample {
    at: Instant,
    /// Thread id → (name, nanoseconds on a CPU since it started).
    threads: HashMap<u32, (String, u64)>,
}

impl Sample {
    /// Now; empty where /proc cannot be read (then nothing is reported).
    pub fn now() -> Sample {
        let at = Instant::now();
        let mut threads = HashMap::new();
        if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
            for task in tasks.flatten() {
                let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else { continue };
                let path = task.path();
                let ran = std::fs::read_to_string(path.join("schedstat"))
                    .ok()
                    .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse::<u64>().ok()));
                let name = std::fs::read_to_string(path.join("comm")).map(|n| n.trim().to_string());
                if let (Some(ran), Ok(name)) = (ran, name) {
                    threads.insert(tid, (name, ran));
                }
            }
        }
        Sample { at, threads }
    }

    /// Each thread's run time, in nanoseconds, between `self` and `later`.
    /// A thread that started in between counts from 0; one that ended is
    /// not seen.
    fn used_until<'a>(&self, later: &'a Sample) -> impl Iterator<Item = (&'a str, u64)> + 'a {
        let before: HashMap<u32, u64> = self.threads.iter().map(|(tid, (_, ran))| (*tid, *ran)).collect();
        later
            .threads
            .iter()
            .map(move |(tid, (name, ran))| (name.as_str(), ran.saturating_sub(before.get(tid).copied().unwrap_or(0))))
    }

    /// What faultline's threads ran between `self` and `later`.
    pub fn until(&self, later: &Sample) -> Option<ClientCpu> {
        let wall = later.at.duration_since(self.at).as_nanos() as f64;
        if wall <= 0.0 || later.threads.is_empty() {
            return None;
        }
        let used: Vec<(&str, u64)> = self.used_until(later).collect();
        let total: u64 = used.iter().map(|(_, u)| u).sum();
        let (name, busiest) = used.into_iter().max_by_key(|(_, u)| *u)?;
        Some(ClientCpu {
            cores: total as f64 / wall,
            host_cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            busiest_thread: name.to_string(),
            busiest_share: (busiest as f64 / wall).min(1.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_thread_is_seen_with_its_run_time() {
        let before = Sample::now();
        let (done, finished) = std::sync::mpsc::channel();
        let (release, released) = std::sync::mpsc::channel::<()>();
        let spinner = std::thread::Builder::new()
            .name("spinner".into())
            .spawn(move || {
                // Spins until the kernel has counted 200 ms of its own run
                // time, however often it is preempted on a busy machine.
                let mine = format!("/proc/self/task/{}/schedstat", unsafe { libc::gettid() });
                let ran = || -> u64 {
                    std::fs::read_to_string(&mine).unwrap().split_whitespace().next().unwrap().parse().unwrap()
                };
                let start = ran();
                while ran() - start < 200_000_000 {
                    std::hint::black_box(0u64);
                }
                done.send(()).unwrap();
                // Stays alive until sampled, so its run time is seen.
                released.recv().unwrap();
            })
            .unwrap();
        finished.recv().unwrap();
        let after = Sample::now();
        release.send(()).unwrap();
        spinner.join().unwrap();
        let spun: u64 = before.used_until(&after).filter(|(name, _)| *name == "spinner").map(|(_, u)| u).sum();
        assert!(spun >= 200_000_000, "{spun} ns");
        let cpu = before.until(&after).expect("/proc/self/task is readable on Linux");
        let wall = after.at.duration_since(before.at).as_secs_f64();
        assert!(cpu.cores >= 0.2 / wall * 0.999, "{cpu:?} over {wall} s");
        assert!(cpu.busiest_share >= (0.2 / wall).min(1.0) * 0.999, "{cpu:?} over {wall} s");
    }
}
