//! What a run creates that carries no faultline label (containers and
//! networks have theirs): the DynamoDB tables it creates, the MongoDB
//! collections it creates on external servers, its servers' data
//! directories. Each is written down before it is created, in a file per
//! run in the state directory, and struck off when the run removes it; a
//! run that ends its own way deletes its file. What a SIGKILLed run leaves
//! is in its file, for `faultline teardown` to list and remove, and for a
//! later run to recognise rather than adopt.
//!
//! The file holds what removing a table or a collection takes, its
//! credentials included (a MongoDB URI's password), so it is readable by
//! its owner only (mode 0600), as ~/.aws/credentials.
//!
//! Also here, because the kinds, the providers and teardown all need them
//! and none of those may reach into another: the run's id (its file's name
//! and its containers' label), whether a run's faultline is still alive,
//! and which of this run's targets are external (what a kind creates there
//! is this file's business).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// A resource a run created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Resource {
    DynamodbTable {
        endpoint: String,
        table: String,
        /// How to reach the endpoint again (region, credentials, TLS).
        access: DynamoAccess,
    },
    /// A collection created on an external MongoDB (servers faultline
    /// starts take theirs with their data directory or container).
    MongodbCollection {
        /// The target's URI, as the spec gives it.
        uri: String,
        database: String,
        collection: String,
    },
    DataDirectory {
        target: String,
        path: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DynamoAccess {
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub insecure: bool,
    pub ca_file: Option<String>,
}

impl Resource {
    /// The same thing, however it is reached.
    fn same(&self, other: &Resource) -> bool {
        match (self, other) {
            (
                Resource::DynamodbTable { endpoint: e1, table: t1, .. },
                Resource::DynamodbTable { endpoint: e2, table: t2, .. },
            ) => e1 == e2 && t1 == t2,
            (
                Resource::MongodbCollection { uri: u1, database: d1, collection: c1 },
                Resource::MongodbCollection { uri: u2, database: d2, collection: c2 },
            ) => (u1, d1, c1) == (u2, d2, c2),
            (Resource::DataDirectory { path: p1, .. }, Resource::DataDirectory { path: p2, .. }) => p1 == p2,
            _ => false,
        }
    }

    /// The target kind that created it, whose [`Kind::remove_listed`]
    /// removes it for teardown; None for a data directory, removed as one.
    ///
    /// [`Kind::remove_listed`]: crate::registry::Kind::remove_listed
    pub fn created_by(&self) -> Option<&'static str> {
        match self {
            Resource::DynamodbTable { .. } => Some("dynamodb"),
            Resource::MongodbCollection { .. } => Some("mongodb"),
            Resource::DataDirectory { .. } => None,
        }
    }

    /// `dynamodb table `t` at http://…`, for teardown's lines.
    pub fn describe(&self) -> String {
        match self {
            Resource::DynamodbTable { endpoint, table, .. } => format!("dynamodb table `{table}` at {endpoint}"),
            Resource::MongodbCollection { uri, database, collection } => {
                format!("mongodb collection `{database}.{collection}` at {}", faultline_model::redact::text(uri))
            }
            Resource::DataDirectory { target, path } => format!("data directory {path} (target {target})"),
        }
    }
}

/// One run's file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// The run's id, as its containers' `faultline.run` label.
    pub run: String,
    pub run_dir: String,
    /// The faultline process that ran it.
    pub pid: u32,
    pub resources: Vec<Resource>,
}

/// The id that labels this run's containers and names its file: the run
/// directory's name and a hash of its full path, so two runs with the same
/// name in different places do not share it.
pub fn run_id(log_dir: &Path) -> String {
    let run_dir = log_dir.parent().unwrap_or(log_dir);
    let full = std::fs::canonicalize(run_dir).unwrap_or_else(|_| run_dir.to_path_buf());
    let name = run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "run".into());
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in full.to_string_lossy().bytes() {
        hash = (hash ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{}-{:06x}", run_id_name(&name), hash & 0xff_ffff)
}

/// The part of [`run_id`] taken from the run directory's name, so
/// `teardown --run` finds a run by the name the user sees.
fn run_id_name(dir_name: &str) -> String {
    let name: String =
        dir_name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect();
    // Keep container names readable: the date part is at the end.
    if name.len() > 48 {
        name[name.len() - 48..].trim_start_matches('-').to_string()
    } else {
        name
    }
}

/// Whether the run id `label` (a [`run_id`]) is the run the user named:
/// the full label, the run directory's name, or its path.
pub fn run_id_matches(label: &str, asked: &str) -> bool {
    if label == asked {
        return true;
    }
    let dir_name = Path::new(asked.trim_end_matches('/')).file_name().map(|n| n.to_string_lossy().into_owned());
    let Some(dir_name) = dir_name else { return false };
    label
        .strip_prefix(&run_id_name(&dir_name))
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|hash| hash.len() == 6 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether `pid` is a live faultline process (a test binary counts too):
/// the run whose file or label names it is still going.
pub fn faultline_alive(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    let name = String::from_utf8_lossy(argv0);
    name.rsplit('/').next().is_some_and(|base| base.starts_with("faultline"))
}

/// The URIs of this run's external targets: what a kind creates on them
/// outlives the run unless removed, so it goes in this file; a server
/// faultline starts takes what is on it with its data directory or
/// container.
static EXTERNAL: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Notes that this run reaches `uri` as an external target.
pub fn note_external(uri: &str) {
    let mut external = EXTERNAL.lock().unwrap_or_else(|e| e.into_inner());
    if !external.iter().any(|u| u == uri) {
        external.push(uri.to_string());
    }
}

/// Whether `uri` is one of this run's external targets.
pub fn is_external(uri: &str) -> bool {
    EXTERNAL.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|u| u == uri)
}

/// The directory the files are in: $FAULTLINE_STATE_DIR, else
/// $XDG_STATE_HOME/faultline/runs, else ~/.local/state/faultline/runs.
pub fn dir() -> PathBuf {
    if let Some(d) = std::env::var_os("FAULTLINE_STATE_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/state")))
        .unwrap_or_else(std::env::temp_dir);
    state.join("faultline/runs")
}

/// This process's run: its file and what is in it.
static CURRENT: OnceLock<Mutex<Option<(PathBuf, Entry)>>> = OnceLock::new();

fn current() -> std::sync::MutexGuard<'static, Option<(PathBuf, Entry)>> {
    CURRENT.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts this run's file (empty until something is recorded).
pub fn open(run: &str, run_dir: &Path) {
    let entry = Entry {
        run: run.to_string(),
        run_dir: std::path::absolute(run_dir).unwrap_or_else(|_| run_dir.to_path_buf()).display().to_string(),
        pid: std::process::id(),
        resources: Vec::new(),
    };
    *current() = Some((dir().join(format!("{run}.json")), entry));
}

/// Writes `resource` down before it is created; true when it was not
/// listed yet. Without an open run (a unit test), nothing is recorded.
pub fn record(resource: Resource) -> anyhow::Result<bool> {
    let mut guard = current();
    let Some((path, entry)) = guard.as_mut() else { return Ok(false) };
    if entry.resources.iter().any(|r| r.same(&resource)) {
        return Ok(false);
    }
    entry.resources.push(resource);
    if let Err(e) = write(path, entry) {
        // Not written down: not listed (a later write would list it).
        entry.resources.pop();
        return Err(e);
    }
    Ok(true)
}

/// Whether this run's file lists `resource`: the run created it and has
/// not removed it.
pub fn lists(resource: &Resource) -> bool {
    current().as_ref().is_some_and(|(_, entry)| entry.resources.iter().any(|r| r.same(resource)))
}

/// Strikes `resource` off this run's file: removed, or not created after
/// all. An error when the file could not be written (it then still lists
/// it, and `faultline teardown` would look for it in vain).
pub fn forget(resource: &Resource) -> anyhow::Result<()> {
    let mut guard = current();
    let Some((path, entry)) = guard.as_mut() else { return Ok(()) };
    entry.resources.retain(|r| !r.same(resource));
    write(path, entry)
}

/// The run ended its own way: its data directories stay with its run
/// directory; a table or collection still listed is one it could not
/// remove, kept for teardown. An error when the file could not be written.
pub fn close() -> anyhow::Result<()> {
    match current().take() {
        Some((path, mut entry)) => {
            entry.resources.retain(|r| !matches!(r, Resource::DataDirectory { .. }));
            write(&path, &entry)
        }
        None => Ok(()),
    }
}

fn write(path: &Path, entry: &Entry) -> anyhow::Result<()> {
    if entry.resources.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("cannot remove the run ledger {}", path.display()))
            }
            _ => Ok(()),
        };
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the run ledger directory {}", dir.display()))?;
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(entry).context("cannot encode the run ledger")?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("cannot write the run ledger {}", tmp.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write the run ledger {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot move {} into place", tmp.display()))
}

/// Every run's file, with where it is; and a line for each file that could
/// not be read (skipped).
pub fn entries() -> (Vec<(PathBuf, Entry)>, Vec<String>) {
    let Ok(listing) = std::fs::read_dir(dir()) else { return (Vec::new(), Vec::new()) };
    let (mut out, mut skipped) = (Vec::new(), Vec::new());
    for path in listing.filter_map(|e| e.ok().map(|e| e.path())) {
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let read = faultline_model::input_file::read(&path, 16 << 20)
            .map_err(anyhow::Error::from)
            .and_then(|bytes| Ok(serde_json::from_slice::<Entry>(&bytes)?));
        match read {
            Ok(entry) => out.push((path, entry)),
            Err(e) => skipped.push(format!("skipping the run ledger {}: {e:#}", path.display())),
        }
    }
    out.sort_by(|a, b| a.1.run.cmp(&b.1.run));
    (out, skipped)
}

/// Strikes `resource` off another run's file (teardown removed it, or a
/// later run took the table back); the file goes when it is empty.
pub fn strike(path: &Path, resource: &Resource) -> anyhow::Result<()> {
    let bytes = faultline_model::input_file::read(path, 16 << 20)?;
    let mut entry: Entry = serde_json::from_slice(&bytes)?;
    entry.resources.retain(|r| !r.same(resource));
    write(path, &entry)
}

/// Another run that listed `resource`: its file and entry; and what the
/// caller should say when none did but some run's file could not be read
/// (it may have been that run's), empty otherwise.
pub fn claimed_elsewhere(resource: &Resource) -> (Option<(PathBuf, Entry)>, String) {
    let own = current().as_ref().map(|(p, _)| p.clone());
    let (entries, skipped) = entries();
    let claimed = entries
        .into_iter()
        .find(|(path, entry)| Some(path) != own.as_ref() && entry.resources.iter().any(|r| r.same(resource)));
    let unsure = match (&claimed, skipped.is_empty()) {
        (None, false) => format!("not known whether a killed run left it: {}", skipped.join("; ")),
        _ => String::new(),
    };
    (claimed, unsure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collection_is_described_without_its_uris_password_and_is_one_resource_by_where_it_is() {
        let at = |uri: &str, collection: &str| Resource::MongodbCollection {
            uri: uri.into(),
            database: "faultline".into(),
            collection: collection.into(),
        };
        let listed = at("mongodb://app:s3cr3t-pw@db.example:27017/", "kv");
        assert_eq!(listed.describe(), "mongodb collection `faultline.kv` at mongodb://app:REDACTED@db.example:27017/");
        assert!(listed.same(&at("mongodb://app:s3cr3t-pw@db.example:27017/", "kv")));
        assert!(!listed.same(&at("mongodb://app:s3cr3t-pw@db.example:27017/", "other")));
        // The file names its kind, as teardown reads it back.
        let json = serde_json::to_value(&listed).unwrap();
        assert_eq!(json["kind"], "mongodb-collection");
    }
}
