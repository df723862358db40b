//! What the spec loader checks on this host before anything starts: that a
//! process target's program exists and can be run (a typo must not cost a
//! ready_timeout after earlier cells ran), with how to install the servers
//! faultline knows.

use std::path::Path;

static PROGRAMS_UNCHECKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// For a process that starts no server (an agent, which loads the spec its
/// coordinator checked on the coordinator's host): servers' programs are
/// not looked for here.
pub fn skip_program_checks() {
    PROGRAMS_UNCHECKED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether this host can mount faultline's fault filesystem (FUSE, as
/// root), which a target's disk faults run on: why not, otherwise.
pub fn check_fault_filesystem() -> Result<(), String> {
    if PROGRAMS_UNCHECKED.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    if !Path::new("/dev/fuse").exists() {
        return Err(
            "this machine has no /dev/fuse: the fault filesystem under disk faults needs FUSE (Debian: fuse3)".into()
        );
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let effective = status.lines().find_map(|l| l.strip_prefix("Uid:")?.split_whitespace().nth(1)?.parse::<u32>().ok());
    match effective {
        Some(0) => Ok(()),
        _ => {
            Err("the fault filesystem under disk faults is a FUSE mount, which needs root: run faultline as root"
                .into())
        }
    }
}

/// Whether `command` names a program that can be started: a path (with `/`,
/// from the working directory) to an executable file, or a name found on
/// PATH. Checked before anything starts, so a typo costs no ready_timeout.
/// A command with a `{placeholder}` is only known at start and passes.
pub fn check_program(command: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    if command.contains('{') || PROGRAMS_UNCHECKED.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    let executable = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.is_file(), m.permissions().mode() & 0o111 != 0));
    if command.contains('/') {
        return match executable(Path::new(command)) {
            Some((true, true)) => Ok(()),
            Some((true, false)) => Err(format!("`{command}` is not executable: `chmod +x {command}`")),
            Some((false, _)) => Err(format!("`{command}` is not a file: name the server's program")),
            None => Err(format!("`{command}` does not exist: give the path of the server's program")),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| executable(&dir.join(command)) == Some((true, true))) {
        return Ok(());
    }
    let how = install_hint(command).map(|h| format!(" ({h})")).unwrap_or_default();
    Err(format!("`{command}` is not installed or not on PATH{how}: install it, or give its path in `command:`"))
}

/// How to install a server faultline knows, for an error that says it is missing.
pub fn install_hint(command: &str) -> Option<&'static str> {
    match command {
        "redis-server" | "redis-sentinel" => Some("on Debian: apt-get install redis-server"),
        "secantusd-rs" => Some("scripts/install-deps.sh installs it (cargo install secantus-mdb)"),
        _ => None,
    }
}
