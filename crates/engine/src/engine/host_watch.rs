//! Watching the host, not only faultline. On a shared CI runner another
//! job may take a core in bursts; a step measured then says little about
//! the target. Over each cell's measured window this reads the kernel's
//! own counts: the busy and stolen time of the cores faultline may run on
//! (/proc/stat, per core of its affinity), the CPU of
//! faultline's processes (itself and its descendants: local agents and
//! process targets) and of the target's containers (their processes, found
//! by their cgroup), and how many threads were runnable. What is left is
//! other processes' (`HostLoad::others_cores`): a window where they or the
//! hypervisor took a share of the cores is disturbed, and a capacity step
//! measured in it is not taken as the target's number (engine/capacity.rs).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use faultline_model::stats::HostLoad;

/// Other processes' share of the host's cores above which a window is
/// disturbed (on 2 cores: 0.4 of a core), and the hypervisor's.
const OTHERS_DISTURB: f64 = 0.2;
const STEAL_DISTURB: f64 = 0.05;
/// How often the run queue is read over a window.
const RUN_QUEUE_EVERY: Duration = Duration::from_millis(250);

/// The kernel's counts at one instant, in clock ticks.
struct Counts {
    at: Instant,
    busy: u64,
    steal: u64,
    ours: u64,
}

/// The CPUs this process may run on (its affinity: a container's cpuset,
/// `taskset`), as /proc/stat numbers them. Only their time is watched: on a
/// big host a container limited to two of its cores is disturbed by what
/// runs on those two, not by the host's other tenants.
fn our_cpus() -> Option<Vec<usize>> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // writes at most its size into it, and CPU_ISSET only reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        Some((0..libc::CPU_SETSIZE as usize).filter(|&cpu| libc::CPU_ISSET(cpu, &set)).collect())
    }
}

/// Busy and stolen ticks over `cpus` (their `cpuN` lines of /proc/stat).
fn host_ticks(cpus: &[usize]) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let (mut busy, mut steal) = (0, 0);
    for line in stat.lines() {
        let mut fields = line.split_whitespace();
        let Some(cpu) = fields.next().and_then(|f| f.strip_prefix("cpu")).and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        if !cpus.contains(&cpu) {
            continue;
        }
        let n: Vec<u64> = fields.filter_map(|f| f.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal (guest time is in user).
        let (idle, iowait, stolen) = (*n.get(3)?, *n.get(4)?, n.get(7).copied().unwrap_or(0));
        busy += n.iter().take(8).sum::<u64>() - idle - iowait - stolen;
        steal += stolen;
    }
    Some((busy, steal))
}

/// Runnable threads now (`procs_running` of /proc/stat).
fn run_queue() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines().find_map(|l| l.strip_prefix("procs_running "))?.trim().parse().ok()
}

/// A process's parent and its CPU ticks (utime + stime) from /proc/PID/stat.
fn process(pid: u32) -> Option<(u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command may hold spaces and parentheses: fields follow the last ')'.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((ppid, ticks))
}

/// Whether a process belongs to one of the containers (its cgroup path
/// names the container's id).
fn in_containers(pid: u32, containers: &[String]) -> bool {
    !containers.is_empty()
        && std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .is_ok_and(|cgroup| containers.iter().any(|id| cgroup.contains(id.as_str())))
}

/// Every process now: its parent and CPU ticks.
fn processes() -> HashMap<u32, (u32, u64)> {
    let Ok(listing) = std::fs::read_dir("/proc") else { return HashMap::new() };
    let pids: Vec<u32> = listing.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
    pids.iter().filter_map(|&pid| Some((pid, process(pid)?))).collect()
}

/// Faultline's processes (this one and its descendants) and the target's
/// containers' among `table`.
fn our_pids(table: &HashMap<u32, (u32, u64)>, containers: &[String]) -> HashSet<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, &(ppid, _)) in table {
        children.entry(ppid).or_default().push(pid);
    }
    let mut mine = HashSet::new();
    let mut todo = vec![std::process::id()];
    while let Some(pid) = todo.pop() {
        if mine.insert(pid) {
            todo.extend(children.get(&pid).into_iter().flatten());
        }
    }
    mine.extend(table.keys().filter(|pid| in_containers(**pid, containers)));
    mine
}

/// The CPU ticks of faultline's processes and the target's containers'.
fn ours(containers: &[String]) -> u64 {
    let table = processes();
    let mine = our_pids(&table, containers);
    table.iter().filter(|(pid, _)| mine.contains(pid)).map(|(_, (_, ticks))| ticks).sum()
}

fn counts(cpus: &[usize], containers: &[String]) -> Option<Counts> {
    let (busy, steal) = host_ticks(cpus)?;
    Some(Counts { at: Instant::now(), busy, steal, ours: ours(containers) })
}

/// Watches the host from `from` until `until` (or `ended`): how busy it was
/// and with whose work. None where /proc cannot be read.
pub async fn watch(
    from: Instant,
    until: Instant,
    ended: CancellationToken,
    containers: Vec<String>,
) -> Option<HostLoad> {
    tokio::select! {
        _ = tokio::time::sleep_until(from) => {}
        _ = ended.cancelled() => return None,
    }
    let cpus = our_cpus().filter(|c| !c.is_empty())?;
    let first = counts(&cpus, &containers)?;
    let mut queue = Vec::new();
    loop {
        queue.extend(run_queue());
        tokio::select! {
            _ = tokio::time::sleep(RUN_QUEUE_EVERY) => {}
            _ = ended.cancelled() => break,
        }
        if Instant::now() >= until {
            break;
        }
    }
    let last = counts(&cpus, &containers)?;
    let seconds = last.at.duration_since(first.at).as_secs_f64();
    let ticks = clock_ticks()?;
    let cores = |a: u64, b: u64| b.saturating_sub(a) as f64 / ticks / seconds.max(1e-3);
    let busy = cores(first.busy, last.busy);
    let ours = cores(first.ours, last.ours).min(busy);
    Some(HostLoad {
        host_cores: cpus.len(),
        busy_cores: busy,
        ours_cores: ours,
        others_cores: busy - ours,
        steal_cores: cores(first.steal, last.steal),
        run_queue: match queue.len() {
            0 => 0.0,
            n => queue.iter().sum::<u64>() as f64 / n as f64,
        },
    })
}

/// Clock ticks per second (the unit of /proc's CPU times).
fn clock_ticks() -> Option<f64> {
    // SAFETY: sysconf reads a configuration value and touches no memory.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then_some(ticks as f64)
}

/// Why a window on this host was disturbed, if it was: other processes or
/// the hypervisor took a share of the cores a measurement cannot ignore.
pub fn disturbed(host: &HostLoad) -> Option<String> {
    let cores = host.host_cores as f64;
    if host.others_cores >= OTHERS_DISTURB * cores {
        return Some(format!(
            "the host was busy: other processes took {:.2} of its {} cores (faultline and the target {:.2})",
            host.others_cores, host.host_cores, host.ours_cores
        ));
    }
    if host.steal_cores >= STEAL_DISTURB * cores {
        return Some(format!(
            "the host was busy: the hypervisor took {:.2} of its {} cores (steal time)",
            host.steal_cores, host.host_cores
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(others: f64, steal: f64) -> HostLoad {
        HostLoad {
            host_cores: 2,
            busy_cores: 1.0 + others,
            ours_cores: 1.0,
            others_cores: others,
            steal_cores: steal,
            run_queue: 1.0,
        }
    }

    #[test]
    fn a_window_is_disturbed_when_others_or_the_hypervisor_take_cores() {
        assert_eq!(disturbed(&load(0.05, 0.0)), None);
        assert!(disturbed(&load(0.9, 0.0)).unwrap().contains("other processes took 0.90 of its 2 cores"));
        assert!(disturbed(&load(0.0, 0.2)).unwrap().contains("steal time"));
    }

    /// A process of our own counts as ours, another's as others': read
    /// from the kernel's process table, not assumed.
    #[test]
    fn our_processes_are_told_from_a_neighbours() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        // Not ours: its parent (the shell) exits at once and leaves it to init.
        let stranger = std::process::Command::new("sh").args(["-c", "sleep 30 >/dev/null 2>&1 & echo $!"]).output();
        let stranger: u32 = String::from_utf8_lossy(&stranger.unwrap().stdout).trim().parse().unwrap();
        let mine = our_pids(&processes(), &[]);
        let _ = std::process::Command::new("kill").arg(stranger.to_string()).status();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(mine.contains(&std::process::id()) && mine.contains(&child.id()), "{mine:?}");
        assert!(!mine.contains(&stranger), "a neighbour counted as ours");
        let (ppid, _) = process(std::process::id()).unwrap();
        assert!(!mine.contains(&ppid), "the parent is not ours");
    }

    #[tokio::test]
    async fn a_window_reads_the_hosts_counts() {
        let now = Instant::now();
        let load = watch(now, now + Duration::from_millis(300), CancellationToken::new(), vec![]).await.unwrap();
        assert!(load.host_cores >= 1 && load.busy_cores >= 0.0 && load.others_cores >= 0.0, "{load:?}");
        assert!(load.ours_cores <= load.busy_cores, "{load:?}");
    }
}
