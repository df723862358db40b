//! A `process` target runs in a process group (and session) of its own, so
//! everything it starts — a `sh -c` wrapper's server, a script's background
//! jobs — is signalled, paused and stopped together, and none of it can
//! outlive faultline: a guardian process kills the group if faultline dies
//! without stopping it (SIGKILL included, which no handler in faultline sees).

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Duration;

/// The byte that tells a guardian its group was stopped in order.
const DISMISS: u8 = b'd';

/// The processes of one group, by pid, with their state letter from
/// /proc/PID/stat (`R`, `S`, `T` stopped, `Z` exited but not reaped...).
pub fn members(pgid: i32) -> Vec<(i32, char)> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let mut found = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // The command name is in parentheses and may hold spaces: the fields
        // after it are `state ppid pgrp ...`.
        let Some((_, rest)) = stat.rsplit_once(") ") else { continue };
        let mut fields = rest.split(' ');
        let state = fields.next().and_then(|s| s.chars().next());
        let group = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
        if let (Some(state), Some(group)) = (state, group) {
            if group == pgid {
                found.push((pid, state));
            }
        }
    }
    found.sort_unstable();
    found
}

/// Members that still run (or are stopped): not exited, reaped or not.
pub fn live_members(pgid: i32) -> Vec<(i32, char)> {
    members(pgid).into_iter().filter(|(_, s)| !matches!(s, 'Z' | 'X')).collect()
}

/// Sends `sig` to every process of the group.
pub fn signal(pgid: i32, sig: i32) -> std::io::Result<()> {
    // SAFETY: kill(2) on a process group this run created (negative pid = group).
    if unsafe { libc::kill(-pgid, sig) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the calling process the leader of a new session and process group;
/// for `pre_exec`, between fork and exec.
pub fn detach_into_own_group() -> std::io::Result<()> {
    // SAFETY: setsid(2) and prctl(2) are async-signal-safe and touch only the
    // calling (just forked) process.
    unsafe {
        if libc::setsid() < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The leader dies with faultline even if the guardian is gone too.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    Ok(())
}

/// A forked process that SIGKILLs a process group when faultline dies. It
/// waits on a pipe whose only write end faultline holds: end-of-file without
/// the dismiss byte means faultline is gone however it died.
pub struct Guardian {
    pid: libc::pid_t,
    tell: Option<OwnedFd>,
}

impl Guardian {
    pub fn watch(pgid: i32) -> std::io::Result<Guardian> {
        let mut ends = [0; 2];
        // SAFETY: pipe2 fills `ends` with two new descriptors (close-on-exec,
        // so no later child of faultline inherits the write end).
        if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let [read_end, write_end] = ends;
        // SAFETY: the child runs only async-signal-safe calls (see `guard`),
        // as it must in a copy of a multi-threaded process.
        match unsafe { libc::fork() } {
            -1 => {
                let e = std::io::Error::last_os_error();
                // SAFETY: closing the descriptors pipe2 just made.
                unsafe {
                    libc::close(read_end);
                    libc::close(write_end);
                }
                Err(e)
            }
            0 => unsafe { guard(read_end, pgid) },
            pid => {
                // SAFETY: our copy of the read end is not needed; the write end
                // is owned from here on.
                unsafe { libc::close(read_end) };
                Ok(Guardian { pid, tell: Some(unsafe { OwnedFd::from_raw_fd(write_end) }) })
            }
        }
    }

    /// The group was stopped in order: the guardian exits without killing
    /// (the group's id could be reused once it is empty).
    pub fn dismiss(&mut self) {
        let Some(fd) = self.tell.take() else { return };
        let _ = std::fs::File::from(fd).write_all(&[DISMISS]);
        // It exits as soon as it runs; reap it so it neither outlives
        // faultline nor leaves a zombie behind. A busy machine may not run it
        // for a while: it is waited for, and the limit only a hang reaches.
        let limit = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            // SAFETY: waitpid on our own child, without blocking.
            if unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), libc::WNOHANG) } != 0 {
                return;
            }
            if std::time::Instant::now() >= limit {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        self.dismiss();
    }
}

/// The guardian's whole life, in the forked child. Only async-signal-safe
/// calls: no allocation, no locks, nothing from std that might take one.
unsafe fn guard(read_end: libc::c_int, pgid: i32) -> ! {
    // Out of faultline's session and process group: a Ctrl-C or a kill of
    // faultline's group does not reach it, so it outlives faultline.
    libc::setsid();
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE] {
        libc::signal(sig, libc::SIG_IGN);
    }
    libc::dup2(read_end, 0);
    // Every other descriptor goes: the pipe's write end (else end-of-file
    // never comes) and faultline's stdout and stderr (a reader waiting for
    // their end-of-file would wait for the guardian too).
    if libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32) != 0 {
        for fd in 1..4096 {
            libc::close(fd);
        }
    }
    let mut byte = 0u8;
    loop {
        let n = libc::read(0, (&raw mut byte).cast(), 1);
        if n == 1 && byte == DISMISS {
            libc::_exit(0);
        }
        if n == 1 || (n < 0 && *libc::__errno_location() == libc::EINTR) {
            continue;
        }
        break;
    }
    libc::kill(-pgid, libc::SIGKILL);
    libc::_exit(0)
}
