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
/// the document has them, else appended after a blank line. A marker counts
/// only on a line of its own outside fenced code, so a document that shows
/// the markers in an example keeps its example. The content's headings are
/// nested under the document's heading above the section (see [`nest`]).
/// A section the document lacks is appended only when it has no other
/// section or `new` says so: a name mistyped must not add a second copy.
pub fn splice(document: &str, name: &str, content: &str, new: bool) -> Result<String, String> {
    let (begin, end) = (begin_marker(name), end_marker(name));
    let line_of = |offset: usize| document[..offset].matches('\n').count() + 1;
    let marker_lines = |marker: &str| -> Vec<usize> {
        outside_fences(document)
            .filter(|(_, line)| line.trim() == marker)
            .map(|(i, line)| i + line.find(marker).unwrap_or(0))
            .collect()
    };
    let (begins, ends) = (marker_lines(&begin), marker_lines(&end));
    let inner = |host_end: usize| {
        format!("\n{}\n", nest(content, host_level(&document[..host_end])).trim_end_matches(['\n', '\r']))
    };
    match (begins.as_slice(), ends.as_slice()) {
        ([], []) if !new && !sections(document).is_empty() => Err(format!(
            "it has no section `{name}`, but has {}: give one of those names, or --new-section to add `{name}` beside them",
            sections(document).iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
        )),
        ([], []) => {
            let mut out = document.to_string();
            if !out.is_empty() {
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push('\n');
            }
            out.push_str(&begin);
            out.push_str(&inner(document.len()));
            out.push_str(&end);
            out.push('\n');
            Ok(out)
        }
        ([b], [e]) if b < e => {
            let start = b + begin.len();
            Ok(format!("{}{}{}", &document[..start], inner(*b), &document[*e..]))
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

/// The lines of `text` outside fenced code blocks (``` or ~~~), each with
/// its byte offset; a fence left open runs to the end.
/// The names of the sections `document` has (their begin markers).
fn sections(document: &str) -> Vec<&str> {
    outside_fences(document)
        .filter_map(|(_, line)| line.trim().strip_prefix("<!-- faultline:begin ")?.strip_suffix(" -->"))
        .collect()
}

fn outside_fences(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut open: Option<(char, usize)> = None;
    let mut offset = 0;
    text.split_inclusive('\n').filter_map(move |line| {
        let at = offset;
        offset += line.len();
        let trimmed = line.trim_start_matches(' ');
        let indent = line.len() - trimmed.len();
        let fence = trimmed
            .chars()
            .next()
            .filter(|c| indent < 4 && (*c == '`' || *c == '~'))
            .map(|c| (c, trimmed.chars().take_while(|x| *x == c).count()));
        match (open, fence) {
            (Some((c, n)), Some((f, m))) if f == c && m >= n && trimmed[m..].trim().is_empty() => {
                open = None;
                None
            }
            (Some(_), _) => None,
            (None, Some((c, n))) if n >= 3 => {
                open = Some((c, n));
                None
            }
            (None, _) => Some((at, line.trim_end_matches(['\n', '\r']))),
        }
    })
}

/// An ATX heading's level (`## Title` is 2), outside code.
fn atx_level(line: &str) -> Option<usize> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let level = trimmed.chars().take_while(|c| *c == '#').count();
    let rest = &trimmed[level..];
    ((1..=6).contains(&level) && (rest.is_empty() || rest.starts_with([' ', '\t']))).then_some(level)
}

/// The level of the last heading in `text` (ATX, or a setext `===`/`---`
/// underline), none when it has no heading.
fn host_level(text: &str) -> Option<usize> {
    let mut level = None;
    let mut previous_blank = true;
    for (_, line) in outside_fences(text) {
        let trimmed = line.trim();
        if let Some(l) = atx_level(line) {
            level = Some(l);
        } else if !previous_blank && !trimmed.is_empty() && trimmed.chars().all(|c| c == '=') {
            level = Some(1);
        } else if !previous_blank && trimmed.len() >= 2 && trimmed.chars().all(|c| c == '-') {
            level = Some(2);
        }
        previous_blank = trimmed.is_empty();
    }
    level
}

/// Rewrites the ATX headings of a rendered section so its outline fits
/// the host document: the first heading is the section's title, one level
/// below the host's heading above the section (as written when the host has
/// none); every later heading goes below the title, keeping their depths
/// relative to each other. Six is the deepest level Markdown has.
pub fn nest(content: &str, host: Option<usize>) -> String {
    let headings: Vec<(usize, usize)> =
        outside_fences(content).filter_map(|(at, line)| Some((at, atx_level(line)?))).collect();
    let Some(&(_, first)) = headings.first() else {
        return content.to_string();
    };
    let title = host.map_or(first, |h| (h + 1).min(6));
    let shallowest_rest = headings[1..].iter().map(|(_, l)| *l).min().unwrap_or(title + 1);
    let mut out = String::with_capacity(content.len() + headings.len() * 2);
    let mut copied = 0;
    for (i, (at, level)) in headings.iter().enumerate() {
        let new = match i {
            0 => title,
            _ => (level + title + 1).saturating_sub(shallowest_rest).clamp(1, 6),
        };
        let hashes = at + content[*at..].find('#').unwrap_or(0);
        out.push_str(&content[copied..hashes]);
        out.push_str(&"#".repeat(new));
        copied = hashes + level;
    }
    out.push_str(&content[copied..]);
    out
}

/// The folder beside the document that holds a section's charts, and the
/// relative path its links use.
pub fn chart_folder(document: &Path, name: &str) -> (PathBuf, String) {
    let relative = format!("{name}-charts");
    (document.parent().unwrap_or(Path::new("")).join(&relative), relative)
}

/// A file faultline rewrites whole (the document of a section, the
/// `--junit` file), checked before any work is done: the real file behind a
/// symlink, and why it cannot be written.
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
                let bytes = faultline_model::input_file::read(&path, faultline_model::input_file::MAX_TEXT_BYTES)
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
        let out = splice(DOC, "s1", "new table\n\n", false).unwrap();
        assert_eq!(
            out,
            "# Bench\n\nIntro.\n\n<!-- faultline:begin s1 -->\nnew table\n<!-- faultline:end s1 -->\n\nTail without newline"
        );
        assert_eq!(splice(&out, "s1", "new table", false).unwrap(), out, "idempotent");
    }

    #[test]
    fn appends_the_markers_when_absent() {
        // A document with other sections refuses a name it lacks: a typo
        // would add a second copy.
        let refused = splice(DOC, "s2", "x", false).unwrap_err();
        assert!(
            refused.contains("it has no section `s2`, but has `s1`") && refused.contains("--new-section"),
            "{refused}"
        );
        let out = splice(DOC, "s2", "x", true).unwrap();
        assert!(out.starts_with(DOC), "the document's bytes come first, unchanged");
        assert_eq!(&out[DOC.len()..], "\n\n<!-- faultline:begin s2 -->\nx\n<!-- faultline:end s2 -->\n");
        assert_eq!(splice(&out, "s2", "x", false).unwrap(), out);
        assert_eq!(splice("", "s", "x", false).unwrap(), "<!-- faultline:begin s -->\nx\n<!-- faultline:end s -->\n");
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
            let e = splice(doc, "s", "x", false).unwrap_err();
            assert!(e.contains(why), "{doc:?}: {e}");
        }
        // Another section's markers are just text.
        assert!(splice("<!-- faultline:begin other -->", "s", "x", true).is_ok());
    }

    #[test]
    fn markers_in_code_fences_or_inside_a_line_are_text() {
        let doc = "# Doc\n\nHow to mark a section:\n\n```md\n<!-- faultline:begin s -->\n<!-- faultline:end s -->\n```\n\n~~~~\n<!-- faultline:begin s -->\n~~~\n~~~~\nInline: `<!-- faultline:end s -->`.\n";
        let out = splice(doc, "s", "x", false).unwrap();
        assert!(out.starts_with(doc), "the examples stay: {out}");
        assert_eq!(&out[doc.len()..], "\n<!-- faultline:begin s -->\nx\n<!-- faultline:end s -->\n");
        // The real markers after the fences are found, the fenced ones left alone.
        let again = splice(&out, "s", "y", false).unwrap();
        assert_eq!(again, out.replace("\nx\n<!--", "\ny\n<!--"));
    }

    #[test]
    fn headings_nest_under_the_host_heading() {
        let content = "### Title\n\nText\n\n## Crash recovery\n\n### Detail\n\n```\n# not a heading\n```\n";
        let under = |doc: &str| {
            let out = splice(doc, "s", content, false).unwrap();
            out[out.find("-->").unwrap()..].to_string()
        };
        let nested = under("# Bench\n\n## 7.2\n\n### 7.2.1 Durability\n\n<!-- faultline:begin s -->\n<!-- faultline:end s -->\n\n# Later\n");
        assert!(nested.contains("\n#### Title\n") && nested.contains("\n##### Crash recovery\n"), "{nested}");
        assert!(nested.contains("\n###### Detail\n") && nested.contains("\n# not a heading\n"), "{nested}");
        // Appended: under the document's last heading, a setext one too.
        let appended = under("Bench\n=====\n\nText\n");
        assert!(appended.contains("\n## Title\n") && appended.contains("\n### Crash recovery\n"), "{appended}");
        assert!(appended.contains("\n#### Detail\n"), "{appended}");
        // No heading above: the title stays as written, the rest below it.
        let alone = under("");
        assert!(alone.contains("\n### Title\n") && alone.contains("\n#### Crash recovery\n"), "{alone}");
        assert!(alone.contains("\n##### Detail\n"), "{alone}");
        // Deeper than six stays at six.
        assert_eq!(nest("# T\n## a\n### b\n", Some(5)), "###### T\n###### a\n###### b\n");
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
