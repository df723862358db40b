//! Which run directory a command that reads a finished run (`compare`,
//! `report`) means: the directory given when it holds a results.json, or
//! the one run directory inside an `--out` folder, so `faultline report
//! runs/` works after a single run; with several, the error lists them.

use std::path::{Path, PathBuf};

use anyhow::bail;

/// The run directory `given` names (itself, or the one run inside it).
pub fn resolve(given: &Path) -> anyhow::Result<PathBuf> {
    // Whatever its results.json is: reading it says what is wrong with it
    // (a FIFO, a device).
    if given.join("results.json").symlink_metadata().is_ok() {
        return Ok(given.to_path_buf());
    }
    let Ok(entries) = std::fs::read_dir(given) else {
        bail!("{} is not a run directory: it does not exist or cannot be read", given.display());
    };
    let mut runs: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.join("results.json").is_file()).collect();
    runs.sort();
    match runs.len() {
        0 => bail!("{} is not a run directory: it has no results.json, nor a run directory inside", given.display()),
        1 => Ok(runs.remove(0)),
        n => {
            let names: Vec<String> = runs.iter().map(|r| r.display().to_string()).collect();
            bail!("{} holds {n} runs: give one of them ({})", given.display(), names.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_of_one_run_names_it_and_of_several_lists_them() {
        let out = tempfile::tempdir().unwrap();
        assert!(resolve(out.path()).unwrap_err().to_string().contains("has no results.json"));
        let first = out.path().join("s-20261206-080000");
        std::fs::create_dir(&first).unwrap();
        std::fs::write(first.join("results.json"), "{}").unwrap();
        assert_eq!(resolve(out.path()).unwrap(), first);
        assert_eq!(resolve(&first).unwrap(), first);
        let second = out.path().join("s-20261206-090000");
        std::fs::create_dir(&second).unwrap();
        std::fs::write(second.join("results.json"), "{}").unwrap();
        let e = resolve(out.path()).unwrap_err().to_string();
        assert!(e.contains("holds 2 runs: give one of them") && e.contains("s-20261206-090000"), "{e}");
    }
}
