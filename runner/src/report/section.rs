//! `faultline report RUN --into FILE --section NAME`: a report as a section
//! of a document the team keeps (BENCHMARK.md), between
//! `<!-- faultline:begin NAME -->` and `<!-- faultline:end NAME -->`.
//! Every byte outside the markers stays as it was; the markers are appended
//! when absent; the same content twice changes nothing; and the file is
//! replaced in one rename, so a failure leaves it whole.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

/// A section name fits in an HTML comment and a file name: letters, digits,
/// `.`, `_` and `-`, starting with a letter or digit, no `--`.
pub fn check_name(name: &str) -> Result<(), String> {
    let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        && !name.contains("--")
        && name.len() <= 100;
    match valid {
        true => Ok(()),
        false => Err(format!(
            "--section `{name}`: a section name is 1 to 100 letters, digits, `.`, `_` or `-`, starting with a \
             letter or digit and without `--` (it goes into the markers <!-- faultline:begin NAME --> and a folder name)"
        )),
    }
}

fn begin_marker(name: &str) -> String {
    format!("<!-- faultline:begin {name} -->")
}

fn end_marker(name: &str) -> String {
    format!("<!-- faultline:end {name} -->")
}

/// The document with `content` as section `name`: between its markers when
/// the document has them, else appended after a blank line.
pub fn splice(document: &str, name: &str, content: &str) -> Result<String, String> {
    let (begin, end) = (begin_marker(name), end_marker(name));
    let inner = format!("\n{}\n", content.trim_end_matches(['\n', '\r']));
    let line_of = |offset: usize| document[..offset].matches('\n').count() + 1;
    let begins: Vec<usize> = document.match_indices(&begin).map(|(i, _)| i).collect();
    let ends: Vec<usize> = document.match_indices(&end).map(|(i, _)| i).collect();
    match (begins.as_slice(), ends.as_slice()) {
        ([], []) => {
            let mut out = document.to_string();
            if !out.is_empty() {
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push('\n');
            }
            out.push_str(&begin);
            out.push_str(&inner);
            out.push_str(&end);
            out.push('\n');
            Ok(out)
        }
        ([b], [e]) if b < e => {
            let start = b + begin.len();
            Ok(format!("{}{inner}{}", &document[..start], &document[*e..]))
        }
        ([b], [e]) => Err(format!(
            "its end marker (line {}) comes before its begin marker (line {}): put `{begin}` before `{end}`",
            line_of(*e),
            line_of(*b)
        )),
        (bs, es) if bs.len() > 1 || es.len() > 1 => Err(format!(
            "section `{name}` has {} begin and {} end markers (lines {}): keep one of each",
            bs.len(),
            es.len(),
            bs.iter().chain(es).map(|i| line_of(*i).to_string()).collect::<Vec<_>>().join(", ")
        )),
        ([b], []) => Err(format!("`{begin}` on line {} has no `{end}` after it: add it or remove both", line_of(*b))),
        (_, es) => Err(format!("`{end}` on line {} has no `{begin}` before it", line_of(es[0]))),
    }
}

/// The folder beside the document that holds a section's charts, and the
/// relative path its links use.
pub fn chart_folder(document: &Path, name: &str) -> (PathBuf, String) {
    let relative = format!("{name}-charts");
    (document.parent().unwrap_or(Path::new("")).join(&relative), relative)
}

/// Where the section will be written, checked before anything is drawn or
/// copied: the real file behind a symlink, and why it cannot be written.
pub struct Destination {
    pub path: PathBuf,
    pub text: String,
    permissions: Option<std::fs::Permissions>,
}

impl Destination {
    pub fn open(path: &Path) -> anyhow::Result<Destination> {
        let path = match std::fs::canonicalize(path) {
            Ok(real) => real,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => path.to_path_buf(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        match std::fs::metadata(&path) {
            Ok(meta) => {
                use std::os::unix::fs::PermissionsExt;
                if !meta.is_file() {
                    bail!("{} is not a file", path.display());
                }
                // Root may write anything; the file's mode still says whether it should be.
                if meta.permissions().mode() & 0o222 == 0 {
                    bail!(
                        "{} is not writable (mode {:o}): make it writable first",
                        path.display(),
                        meta.permissions().mode() & 0o777
                    );
                }
                let bytes = crate::input_file::read(&path, crate::input_file::MAX_TEXT_BYTES)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let text = String::from_utf8(bytes)
                    .map_err(|_| anyhow::anyhow!("{} is not UTF-8 text: not changing it", path.display()))?;
                Ok(Destination { path, text, permissions: Some(meta.permissions()) })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
                if !dir.is_dir() {
                    bail!("cannot create {}: {} is not a directory", path.display(), dir.display());
                }
                Ok(Destination { path, text: String::new(), permissions: None })
            }
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Replaces the file with `text` in one rename, keeping its permissions;
    /// false when it already held exactly that.
    pub fn replace(&self, text: &str) -> anyhow::Result<bool> {
        if self.permissions.is_some() && self.text == text {
            return Ok(false);
        }
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut tmp = tempfile::Builder::new()
            .prefix(".faultline-section-")
            .tempfile_in(dir)
            .with_context(|| format!("cannot write beside {}", self.path.display()))?;
        tmp.write_all(text.as_bytes()).with_context(|| format!("cannot write beside {}", self.path.display()))?;
        tmp.as_file().sync_all()?;
        let mode = self.permissions.clone().unwrap_or_else(|| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::Permissions::from_mode(0o644)
        });
        std::fs::set_permissions(tmp.path(), mode)?;
        tmp.persist(&self.path).map_err(|e| anyhow::anyhow!("cannot replace {}: {}", self.path.display(), e.error))?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str =
        "# Bench\n\nIntro.\n\n<!-- faultline:begin s1 -->\nold\n<!-- faultline:end s1 -->\n\nTail without newline";

    #[test]
    fn replaces_between_the_markers_and_nothing_else() {
        let out = splice(DOC, "s1", "new table\n\n").unwrap();
        assert_eq!(
            out,
            "# Bench\n\nIntro.\n\n<!-- faultline:begin s1 -->\nnew table\n<!-- faultline:end s1 -->\n\nTail without newline"
        );
        assert_eq!(splice(&out, "s1", "new table").unwrap(), out, "idempotent");
    }

    #[test]
    fn appends_the_markers_when_absent() {
        let out = splice(DOC, "s2", "x").unwrap();
        assert!(out.starts_with(DOC), "the document's bytes come first, unchanged");
        assert_eq!(&out[DOC.len()..], "\n\n<!-- faultline:begin s2 -->\nx\n<!-- faultline:end s2 -->\n");
        assert_eq!(splice(&out, "s2", "x").unwrap(), out);
        assert_eq!(splice("", "s", "x").unwrap(), "<!-- faultline:begin s -->\nx\n<!-- faultline:end s -->\n");
    }

    #[test]
    fn broken_markers_are_refused() {
        for (doc, why) in [
            ("<!-- faultline:begin s -->\n", "has no `<!-- faultline:end s -->`"),
            ("a\n<!-- faultline:end s -->\n", "line 2 has no"),
            ("<!-- faultline:end s -->\n<!-- faultline:begin s -->\n", "comes before"),
            (
                "<!-- faultline:begin s -->\n<!-- faultline:end s -->\n<!-- faultline:begin s -->\n<!-- faultline:end s -->",
                "2 begin and 2 end",
            ),
        ] {
            let e = splice(doc, "s", "x").unwrap_err();
            assert!(e.contains(why), "{doc:?}: {e}");
        }
        // Another section's markers are just text.
        assert!(splice("<!-- faultline:begin other -->", "s", "x").is_ok());
    }

    #[test]
    fn section_names() {
        for ok in ["kv-durability", "7.3", "a_b"] {
            check_name(ok).unwrap();
        }
        for bad in ["", "a b", "a-->", "x--y", "-x", "a/b", "é"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
