//! Printing to standard output as Unix tools do: a reader that went away
//! (`faultline run … | head -1`) is not an error and never a panic — the
//! command goes on and exits with its own code; any other write error (a
//! full disk) is said once on stderr. `println!` would panic instead.

use std::io::{self, Write};

/// Writes `text` to stdout and flushes it.
pub fn print(text: &str) {
    let text = crate::redact::text(text);
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => eprintln!("error: cannot write to stdout: {e}"),
        _ => {}
    }
}

/// `println!` that survives a closed stdout.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::stdout::print(&format!("{}\n", format_args!($($arg)*)))
    };
}
pub use crate::say;

/// `eprintln!` with credentials redacted: for errors and warnings that may
/// quote a URI or a server's answer.
#[macro_export]
macro_rules! say_err {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = format!("{}\n", format_args!($($arg)*));
        let _ = std::io::stderr().write_all($crate::redact::text(&line).as_bytes());
    }};
}
pub use crate::say_err;
