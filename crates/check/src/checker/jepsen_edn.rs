//! Reading Jepsen histories into [`Operation`]s for the linearizability
//! checker.
//!
//! Two line formats are understood, and may even be mixed:
//!
//! * Jepsen's log of operations, as written by `jepsen.util/log-op`:
//!   `INFO  jepsen.util - 3 :invoke :cas [1 4]`: process, type, function and
//!   value, separated by tabs (any whitespace is accepted). Lines without an
//!   operation event (other loggers, free text) are skipped.
//! * One EDN map per line, as in Jepsen's `history.edn`:
//!   `{:process 0, :type :invoke, :f :get, :key "6", :value nil}`.
//!
//! Events of non-client processes (`:nemesis`) are skipped. Invocations and
//! completions are paired by process. An operation is timed by line numbers:
//! `call` is the 1-based line of its invocation and `ret` that of its
//! completion, so a witness points straight into the file.
//!
//! Completions are interpreted as follows:
//!
//! * `:ok` — the operation took effect, with the given result.
//! * `:info`, or no completion at all — the outcome is unknown: `ret` is
//!   `None` and the output [`Output::Unknown`].
//! * `:fail` — the operation did not take effect, so it is dropped; except
//!   for a register's `:cas`, where `:fail` reports that the comparison did
//!   not match. That is an observation of the register (Jepsen's etcd client
//!   maps etcd's "compare failed" error to `:fail`), so it becomes
//!   [`Output::CasOk`]`(false)`, as in Porcupine's etcd model.

use std::collections::HashMap;
use std::fmt;
use std::io::{BufRead, Read};
use std::mem::size_of;
use std::time::Instant;

use super::linearizability::{Input, Model, Operation, Output};

/// A line that looks like an operation event but cannot be read, or input
/// that holds no operation at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Why [`read`] stopped without a history.
#[derive(Debug)]
pub enum ReadError {
    /// The input is not a history: never a verdict.
    Unreadable(ParseError),
    /// The input could not be read at all.
    Io(std::io::Error),
    /// The deadline passed while reading; `line` lines were read.
    OutOfTime { line: usize },
    /// The operations read so far would pass the memory cap.
    OutOfMemory { line: usize, bytes: usize },
}

/// A history read by [`read`], with the estimated bytes it holds (which the
/// checker counts against its memory cap).
pub struct Parsed {
    pub ops: Vec<Operation>,
    pub bytes: usize,
}

/// Parses a Jepsen history (either line format) into the operations of
/// `model`, in invocation order. Failed operations are already left out, as
/// [`crate::checker::linearizability::check`] expects.
#[cfg(test)]
pub fn parse(text: &str, model: Model) -> Result<Vec<Operation>, ParseError> {
    match read(text.as_bytes(), model, None, usize::MAX) {
        Ok(parsed) => Ok(parsed.ops),
        Err(ReadError::Unreadable(e)) => Err(e),
        Err(other) => panic!("unbounded read of a string stopped: {other:?}"),
    }
}

/// Lines read between looks at the clock.
const CLOCK_EVERY: usize = 1024;

/// Longest line read; a history's lines are one op event each.
const MAX_LINE: usize = 64 * 1024;

/// [`parse`] from a stream, one line at a time, so the text is never held
/// whole: stops at `deadline`, and rather than let the operations read pass
/// `max_bytes` (estimated).
pub fn read(
    mut input: impl BufRead,
    model: Model,
    deadline: Option<Instant>,
    max_bytes: usize,
) -> Result<Parsed, ReadError> {
    let mut history = Builder::new(model);
    let mut buffer = Vec::new();
    let mut line = 0;
    loop {
        buffer.clear();
        // One line is held at a time, and no line may be longer than
        // MAX_LINE: a file without newlines cannot slip past the cap.
        let read = (&mut input).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut buffer).map_err(ReadError::Io)?;
        if read == 0 {
            break;
        }
        line += 1;
        if buffer.len() > MAX_LINE {
            let message = format!("the line is longer than {} KiB; no history line is", MAX_LINE >> 10);
            return Err(ReadError::Unreadable(ParseError { line, message }));
        }
        if line % CLOCK_EVERY == 0 && deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(ReadError::OutOfTime { line });
        }
        let Ok(text) = std::str::from_utf8(&buffer) else {
            return Err(ReadError::Unreadable(ParseError { line, message: "not UTF-8 text".to_string() }));
        };
        history.line(line, text.trim_end_matches(['\n', '\r'])).map_err(ReadError::Unreadable)?;
        if history.bytes > max_bytes {
            return Err(ReadError::OutOfMemory { line, bytes: history.bytes });
        }
    }
    history.finish(line).map_err(ReadError::Unreadable)
}

/// The operations of a history as its lines are read.
struct Builder {
    model: Model,
    ops: Vec<Operation>,
    /// Failed operations are only known to be failed once they complete.
    failed: Vec<bool>,
    /// Process -> (index into `ops`, function, line of the invocation).
    pending: HashMap<u64, (usize, String, usize)>,
    /// Estimated bytes of `ops` and `failed`.
    bytes: usize,
    /// The first non-blank line without an operation event, if any.
    first_skipped: Option<usize>,
}

impl Builder {
    fn new(model: Model) -> Self {
        Builder { model, ops: Vec::new(), failed: Vec::new(), pending: HashMap::new(), bytes: 0, first_skipped: None }
    }

    fn line(&mut self, line: usize, text: &str) -> Result<(), ParseError> {
        let err = |message: String| ParseError { line, message };
        let Some(event) = read_event(text).map_err(err)? else {
            if self.first_skipped.is_none() && !text.trim().is_empty() {
                self.first_skipped = Some(line);
            }
            return Ok(());
        };
        let Some(process) = event.process else {
            return Ok(());
        };
        let time = line as u64;

        let completion = match event.kind {
            Kind::Invoke => {
                if let Some((_, f, at)) = self.pending.get(&process) {
                    return Err(err(format!(
                        "process {process} invokes :{} while its :{f} from line {at} has not completed",
                        event.f
                    )));
                }
                let input = input(self.model, &event).map_err(err)?;
                self.bytes += input_heap_bytes(&input);
                self.pending.insert(process, (self.ops.len(), event.f, line));
                let capacity = self.ops.capacity();
                self.ops.push(Operation { client: process, input, call: time, ret: None, output: Output::Unknown });
                self.failed.push(false);
                self.bytes += (self.ops.capacity() - capacity) * (size_of::<Operation>() + 1);
                return Ok(());
            }
            Kind::Complete(completion) => completion,
        };

        let Some((i, f, at)) = self.pending.remove(&process) else {
            return Err(err(format!("process {process} completes :{} without a pending invocation", event.f)));
        };
        if f != event.f {
            return Err(err(format!("process {process} completes :{} but invoked :{f} on line {at}", event.f)));
        }
        let op = &mut self.ops[i];
        match completion {
            Completion::Ok => {
                op.ret = Some(time);
                op.output = ok_output(&op.input, &event.value).map_err(err)?;
                if let Output::Str(s) = &op.output {
                    self.bytes += s.capacity();
                }
            }
            Completion::Fail if matches!(op.input, Input::Cas(..)) => {
                op.ret = Some(time);
                op.output = Output::CasOk(false);
            }
            Completion::Fail => self.failed[i] = true,
            // Unknown outcome: leave `ret` and `output` unknown.
            Completion::Info => {}
        }
        Ok(())
    }

    /// The operations, once every line is read; `lines` is how many.
    fn finish(self, lines: usize) -> Result<Parsed, ParseError> {
        // Input with no operation at all is not an empty history: it is not a
        // history (an empty file, free text, a different format).
        if self.ops.is_empty() {
            let line = self.first_skipped.unwrap_or(1);
            let message = match (lines, self.first_skipped) {
                (0, _) => "the file is empty: no operation to check".to_string(),
                (_, None) => format!("the file holds no operation event, only {lines} blank line(s)"),
                (_, Some(_)) => format!(
                    "no client operation event in {lines} line(s); this line is the first that is not one \
                     (expected Jepsen log lines `… jepsen.util - PROCESS :TYPE :F VALUE` or one EDN map per line)"
                ),
            };
            return Err(ParseError { line, message });
        }
        // Operations still pending never completed: their outcome is unknown,
        // which is how they already stand.
        let Builder { mut ops, failed, bytes, .. } = self;
        let mut failed = failed.into_iter();
        ops.retain(|_| !failed.next().unwrap_or(false));
        Ok(Parsed { ops, bytes })
    }
}

/// Heap bytes an input owns, for the memory estimate.
fn input_heap_bytes(input: &Input) -> usize {
    match input {
        Input::Read | Input::Write(_) | Input::Cas(..) => 0,
        Input::Get(k) => k.capacity(),
        Input::Put(k, v) | Input::Append(k, v) => k.capacity() + v.capacity(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Invoke,
    Complete(Completion),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Completion {
    Ok,
    Fail,
    Info,
}

impl Kind {
    fn from_keyword(word: &str) -> Option<Kind> {
        match word {
            "invoke" => Some(Kind::Invoke),
            "ok" => Some(Kind::Complete(Completion::Ok)),
            "fail" => Some(Kind::Complete(Completion::Fail)),
            "info" => Some(Kind::Complete(Completion::Info)),
            _ => None,
        }
    }
}

/// One line's operation event.
struct Event {
    /// `None` for a non-client process such as `:nemesis`.
    process: Option<u64>,
    kind: Kind,
    /// The function, without its colon.
    f: String,
    key: Option<Edn>,
    value: Edn,
}

/// The marker of a `jepsen.util/log-op` line.
const LOG_MARKER: &str = "jepsen.util - ";

/// Reads the event of one line, `Ok(None)` if the line has none.
fn read_event(line: &str) -> Result<Option<Event>, String> {
    let trimmed = line.trim();
    if trimmed.starts_with('{') {
        return event_from_map(read_all(trimmed)?).map(Some);
    }
    // EDN that is not one map per line (a tagged literal, a vector of the
    // whole history) would hide its operations if skipped as free text.
    if let Some(first) = trimmed.chars().next().filter(|c| "#[(".contains(*c)) {
        let what = match first {
            '#' => format!("a tagged or dispatch form `{}`", trimmed.split_whitespace().next().unwrap_or("#")),
            _ => format!("an EDN `{first}` collection"),
        };
        return Err(format!("{what} where an operation (one EDN map per line) or a log line was expected"));
    }
    let Some(at) = line.find(LOG_MARKER) else {
        return Ok(None);
    };
    let rest = &line[at + LOG_MARKER.len()..];
    // jepsen.util logs other things too; an operation has its type second.
    let mut words = rest.split_whitespace();
    let is_event =
        words.next().is_some() && words.next().and_then(|w| w.strip_prefix(':')).and_then(Kind::from_keyword).is_some();
    if !is_event {
        return Ok(None);
    }
    let mut values = read_all(rest)?.into_iter();
    let (Some(process), Some(Edn::Keyword(kind)), Some(f)) = (values.next(), values.next(), values.next()) else {
        return Err("expected `process type function value`".to_string());
    };
    let value = values.next().ok_or("missing the value after the function (a truncated line?)")?;
    if let Some(extra) = values.next() {
        return Err(format!("unexpected {extra} after the value"));
    }
    Ok(Some(Event {
        process: process_id(&process)?,
        kind: Kind::from_keyword(&kind).ok_or_else(|| format!("unknown type :{kind}"))?,
        f: function(&f)?,
        key: None,
        value,
    }))
}

fn event_from_map(values: Vec<Edn>) -> Result<Event, String> {
    let [Edn::Map(entries)] =
        <[Edn; 1]>::try_from(values).map_err(|_| "expected exactly one EDN map on the line".to_string())?
    else {
        return Err("expected an EDN map".to_string());
    };
    let field = |name: &str| entries.iter().find(|(k, _)| matches!(k, Edn::Keyword(k) if k == name)).map(|(_, v)| v);
    let require = |name: &str| field(name).ok_or_else(|| format!("missing :{name}"));
    let kind = match require("type")? {
        Edn::Keyword(k) => Kind::from_keyword(k).ok_or_else(|| format!("unknown :type :{k}"))?,
        other => return Err(format!("expected a keyword :type, found {other}")),
    };
    let process = process_id(require("process")?)?;
    // A client's event always carries its value, nil included; without one
    // the line is truncated or not Jepsen's, and must not read as nil.
    let value = match field("value") {
        Some(v) => v.clone(),
        None if process.is_none() => Edn::Nil,
        None => return Err("missing :value (a client operation always has one, nil included)".to_string()),
    };
    Ok(Event { process, kind, f: function(require("f")?)?, key: field("key").cloned(), value })
}

fn process_id(value: &Edn) -> Result<Option<u64>, String> {
    match value {
        Edn::Int(p) => u64::try_from(*p).map(Some).map_err(|_| format!("negative process {p}")),
        // The nemesis and other named processes are not clients.
        Edn::Keyword(_) => Ok(None),
        other => Err(format!("expected a process number, found {other}")),
    }
}

fn function(value: &Edn) -> Result<String, String> {
    match value {
        Edn::Keyword(f) => Ok(f.clone()),
        other => Err(format!("expected a keyword function, found {other}")),
    }
}

fn input(model: Model, event: &Event) -> Result<Input, String> {
    let value = &event.value;
    match (model, event.f.as_str()) {
        (Model::Register, "read") => Ok(Input::Read),
        (Model::Register, "write") => Ok(Input::Write(int(value, "the :write value")?)),
        (Model::Register, "cas") => match value {
            Edn::Seq(pair) if pair.len() == 2 => {
                Ok(Input::Cas(int(&pair[0], "the :cas expected value")?, int(&pair[1], "the :cas new value")?))
            }
            other => Err(format!("expected a :cas value [from to], found {other}")),
        },
        (Model::Kv, "get") => Ok(Input::Get(key(event)?)),
        (Model::Kv, "put") => Ok(Input::Put(key(event)?, string(value, "the :put value")?)),
        (Model::Kv, "append") => Ok(Input::Append(key(event)?, string(value, "the :append value")?)),
        (Model::Register, f) => Err(format!("operation :{f} is not part of the register model (:read, :write, :cas)")),
        (Model::Kv, f) => Err(format!("operation :{f} is not part of the kv model (:get, :put, :append)")),
    }
}

fn ok_output(input: &Input, value: &Edn) -> Result<Output, String> {
    Ok(match input {
        Input::Read => match value {
            Edn::Nil => Output::Value(None),
            v => Output::Value(Some(int(v, "the value read")?)),
        },
        Input::Write(_) | Input::Put(..) | Input::Append(..) => Output::Ok,
        Input::Cas(..) => Output::CasOk(true),
        // A key that was never written reads as nil; the model starts every
        // key at "".
        Input::Get(_) => match value {
            Edn::Nil => Output::Str(String::new()),
            v => Output::Str(string(v, "the value read")?),
        },
    })
}

fn int(value: &Edn, what: &str) -> Result<i64, String> {
    match value {
        Edn::Int(i) => Ok(*i),
        other => Err(format!("expected an integer as {what}, found {other}")),
    }
}

fn string(value: &Edn, what: &str) -> Result<String, String> {
    match value {
        Edn::Str(s) => Ok(s.clone()),
        other => Err(format!("expected a string as {what}, found {other}")),
    }
}

fn key(event: &Event) -> Result<String, String> {
    match &event.key {
        Some(Edn::Str(k)) => Ok(k.clone()),
        Some(Edn::Int(k)) => Ok(k.to_string()),
        Some(other) => Err(format!("expected a string or integer :key, found {other}")),
        None => Err(format!(":{} needs a :key", event.f)),
    }
}

// ---------------------------------------------------------------------------
// A small EDN reader: enough for Jepsen operation maps and log values.
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Edn {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// Without the leading colon.
    Keyword(String),
    Symbol(String),
    /// A vector, list or set.
    Seq(Vec<Edn>),
    Map(Vec<(Edn, Edn)>),
}

impl fmt::Display for Edn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Edn::Nil => write!(f, "nil"),
            Edn::Bool(b) => write!(f, "{b}"),
            Edn::Int(i) => write!(f, "{i}"),
            Edn::Float(x) => write!(f, "{x}"),
            Edn::Str(s) => write!(f, "{s:?}"),
            Edn::Keyword(k) => write!(f, ":{k}"),
            Edn::Symbol(s) => write!(f, "{s}"),
            Edn::Seq(items) => {
                write!(f, "[")?;
                for (i, item) in items.iter().enumerate() {
                    write!(f, "{}{item}", if i == 0 { "" } else { " " })?;
                }
                write!(f, "]")
            }
            Edn::Map(entries) => {
                write!(f, "{{")?;
                for (i, (k, v)) in entries.iter().enumerate() {
                    write!(f, "{}{k} {v}", if i == 0 { "" } else { ", " })?;
                }
                write!(f, "}}")
            }
        }
    }
}

/// Reads every EDN value in `text`.
fn read_all(text: &str) -> Result<Vec<Edn>, String> {
    let mut reader = Reader { chars: text.chars().collect(), pos: 0 };
    let mut values = Vec::new();
    while reader.skip_whitespace() {
        values.push(reader.value(0)?);
    }
    Ok(values)
}

struct Reader {
    chars: Vec<char>,
    pos: usize,
}

/// Deeper nesting than this is certainly not an operation, and bounding it
/// keeps the recursive reader's stack use small.
const MAX_DEPTH: usize = 32;

impl Reader {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    /// Skips whitespace (commas included) and comments; false at the end.
    fn skip_whitespace(&mut self) -> bool {
        while let Some(c) = self.peek() {
            if c == ';' {
                self.pos = self.chars.len();
            } else if c.is_whitespace() || c == ',' {
                self.pos += 1;
            } else {
                return true;
            }
        }
        false
    }

    fn value(&mut self, depth: usize) -> Result<Edn, String> {
        if depth > MAX_DEPTH {
            return Err("EDN nested too deeply".to_string());
        }
        if !self.skip_whitespace() {
            return Err("unexpected end of line".to_string());
        }
        let c = self.chars[self.pos];
        match c {
            '"' => self.string(),
            '[' | '(' => {
                self.pos += 1;
                self.seq(if c == '[' { ']' } else { ')' }, depth)
            }
            '#' if self.chars.get(self.pos + 1) == Some(&'{') => {
                self.pos += 2;
                self.seq('}', depth)
            }
            '{' => {
                self.pos += 1;
                let items = self.seq_items('}', depth)?;
                if items.len() % 2 != 0 {
                    return Err("map with an odd number of forms".to_string());
                }
                let mut items = items.into_iter();
                let mut entries = Vec::new();
                while let (Some(k), Some(v)) = (items.next(), items.next()) {
                    entries.push((k, v));
                }
                Ok(Edn::Map(entries))
            }
            ']' | ')' | '}' => Err(format!("unexpected `{c}`")),
            _ => self.atom(),
        }
    }

    fn seq(&mut self, close: char, depth: usize) -> Result<Edn, String> {
        self.seq_items(close, depth).map(Edn::Seq)
    }

    fn seq_items(&mut self, close: char, depth: usize) -> Result<Vec<Edn>, String> {
        let mut items = Vec::new();
        loop {
            if !self.skip_whitespace() {
                return Err(format!("missing `{close}`"));
            }
            if self.chars[self.pos] == close {
                self.pos += 1;
                return Ok(items);
            }
            items.push(self.value(depth + 1)?);
        }
    }

    fn string(&mut self) -> Result<Edn, String> {
        self.pos += 1; // opening quote
        let mut s = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err("unterminated string".to_string());
            };
            self.pos += 1;
            match c {
                '"' => return Ok(Edn::Str(s)),
                '\\' => {
                    let escaped = self.peek().ok_or("unterminated string")?;
                    self.pos += 1;
                    s.push(match escaped {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        '"' | '\\' => escaped,
                        'u' => {
                            let hex: String = self.chars.iter().skip(self.pos).take(4).collect();
                            self.pos += 4;
                            u32::from_str_radix(&hex, 16)
                                .ok()
                                .and_then(char::from_u32)
                                .ok_or_else(|| format!("bad escape \\u{hex}"))?
                        }
                        other => return Err(format!("bad escape \\{other}")),
                    });
                }
                _ => s.push(c),
            }
        }
    }

    /// A number, keyword, symbol, nil or boolean.
    fn atom(&mut self) -> Result<Edn, String> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_whitespace() || ",;\"()[]{}".contains(c) {
                break;
            }
            self.pos += 1;
        }
        let token: String = self.chars[start..self.pos].iter().collect();
        let numeric = token.trim_start_matches(['-', '+']).starts_with(|c: char| c.is_ascii_digit());
        Ok(match token.as_str() {
            "nil" => Edn::Nil,
            "true" => Edn::Bool(true),
            "false" => Edn::Bool(false),
            _ if token.starts_with(':') && token.len() > 1 => Edn::Keyword(token[1..].to_string()),
            _ if numeric => {
                // Clojure marks arbitrary-precision integers with `N`.
                let digits = token.strip_suffix('N').unwrap_or(&token);
                match digits.parse::<i64>() {
                    Ok(i) => Edn::Int(i),
                    Err(_) => Edn::Float(
                        digits
                            .strip_suffix('M')
                            .unwrap_or(digits)
                            .parse()
                            .map_err(|_| format!("bad number `{token}`"))?,
                    ),
                }
            }
            _ if token.starts_with('#') => return Err(format!("unsupported tagged or dispatch form `{token}`")),
            _ if token.starts_with('\\') || token == ":" => return Err(format!("unsupported EDN `{token}`")),
            _ => Edn::Symbol(token),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::linearizability::{check, Verdict};
    use std::fs;
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    fn log(lines: &[&str]) -> String {
        lines.iter().map(|l| format!("INFO  jepsen.util - {l}\n")).collect()
    }

    #[test]
    fn reads_a_jepsen_log() {
        let text = format!(
            "INFO  jepsen.core - Worker 0 starting\n{}",
            log(&[
                "0\t:invoke\t:read\tnil",
                "1\t:invoke\t:write\t4",
                ":nemesis\t:info\t:start\tnil",
                "0\t:ok\t:read\tnil",
                "1\t:ok\t:write\t4",
                "2\t:invoke\t:cas\t[4 1]",
                "3\t:invoke\t:cas\t[0 2]",
                "2\t:ok\t:cas\t[4 1]",
                "3\t:fail\t:cas\t[0 2]",
                "4\t:invoke\t:write\t3",
                "4\t:info\t:write\t:timed-out",
                "0\t:invoke\t:write\t1",
                "1\t:invoke\t:read\tnil",
                "1\t:fail\t:read\tnil",
            ])
        );
        let ops = parse(&text, Model::Register).unwrap();
        let op = |client, input, call, ret, output| Operation { client, input, call, ret, output };
        assert_eq!(
            ops,
            vec![
                op(0, Input::Read, 2, Some(5), Output::Value(None)),
                op(1, Input::Write(4), 3, Some(6), Output::Ok),
                op(2, Input::Cas(4, 1), 7, Some(9), Output::CasOk(true)),
                op(3, Input::Cas(0, 2), 8, Some(10), Output::CasOk(false)),
                op(4, Input::Write(3), 11, None, Output::Unknown),
                // Never completed.
                op(0, Input::Write(1), 13, None, Output::Unknown),
                // The failed read on line 14 is dropped.
            ]
        );
    }

    #[test]
    fn reads_edn_maps() {
        let text = r#"
{:process 0, :type :invoke, :f :append, :key "0", :value "x 0 0 y"}
{:process 1, :type :invoke, :f :get, :key "0", :value nil}
{:process 0, :type :ok, :f :append, :key "0", :value "x 0 0 y"}
{:process 1, :type :ok, :f :get, :key "0", :value "x 0 0 y"}
{:process 2, :type :invoke, :f :put, :key 7, :value "a\"b", :time 12}
{:process 2, :type :fail, :f :put, :key 7, :value "a\"b"}
{:process 3, :type :invoke, :f :get, :key "9", :value nil}
{:process 3, :type :ok, :f :get, :key "9", :value nil}
{:process :nemesis, :type :info, :f :kill, :value {:n1 [:killed]}}
{:process 4, :type :invoke, :f :put, :key "1", :value "v"}
{:process 4, :type :info, :f :put, :key "1", :value "v", :error [:timeout]}
"#;
        let ops = parse(text, Model::Kv).unwrap();
        let summary: Vec<_> =
            ops.iter().map(|o| (o.client, o.input.clone(), o.call, o.ret, o.output.clone())).collect();
        let s = |v: &str| v.to_string();
        assert_eq!(
            summary,
            vec![
                (0, Input::Append(s("0"), s("x 0 0 y")), 2, Some(4), Output::Ok),
                (1, Input::Get(s("0")), 3, Some(5), Output::Str(s("x 0 0 y"))),
                (3, Input::Get(s("9")), 8, Some(9), Output::Str(s(""))),
                (4, Input::Put(s("1"), s("v")), 11, None, Output::Unknown),
            ]
        );
    }

    #[test]
    fn unreadable_events_name_their_line() {
        let cases: &[(&str, Model, usize, &str)] = &[
            ("{:process 0, :type :invoke, :f :get, :value nil}", Model::Kv, 1, ":get needs a :key"),
            ("{:process 0, :type :invoke, :f :get, :key \"1\"\n{:process 0", Model::Kv, 1, "missing `}`"),
            (
                "INFO  jepsen.util - 0\t:invoke\t:write\tfour",
                Model::Register,
                1,
                "expected an integer as the :write value, found four",
            ),
            (
                "INFO  jepsen.util - 0\t:invoke\t:cas\t[1]",
                Model::Register,
                1,
                "expected a :cas value [from to], found [1]",
            ),
            (
                "\nINFO  jepsen.util - 0\t:ok\t:read\t1",
                Model::Register,
                2,
                "process 0 completes :read without a pending invocation",
            ),
            (
                "INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO  jepsen.util - 0\t:invoke\t:read\tnil",
                Model::Register,
                2,
                "process 0 invokes :read while its :read from line 1 has not completed",
            ),
            (
                "INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO  jepsen.util - 0\t:ok\t:write\t1",
                Model::Register,
                2,
                "process 0 completes :write but invoked :read on line 1",
            ),
            (
                "INFO  jepsen.util - 0\t:invoke\t:get\tnil",
                Model::Register,
                1,
                "operation :get is not part of the register model",
            ),
            (
                "{:process 0, :type :invoke, :f :read, :value nil}",
                Model::Kv,
                1,
                "operation :read is not part of the kv model",
            ),
            ("{:process 0, :type :begin, :f :get}", Model::Kv, 1, "unknown :type :begin"),
        ];
        for &(text, model, line, message) in cases {
            let e = parse(text, model).unwrap_err();
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.message.starts_with(message), "{text}: {e}");
            assert!(e.to_string().starts_with(&format!("line {line}: ")));
        }
    }

    #[test]
    fn lines_without_events_are_skipped() {
        let text = "\
INFO  jepsen.core - Running test
INFO  jepsen.util - Timing: 3.2 s
WARN  jepsen.util - 0 crashed
; a comment
INFO  jepsen.util - 0\t:invoke\t:read\tnil
";
        let ops = parse(text, Model::Register).unwrap();
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0].call, 5);
    }

    /// Input the checker could not read is an error naming its line, never
    /// an empty or shortened history that would get a verdict.
    #[test]
    fn unreadable_input_is_never_a_history() {
        let invoke = "{:process 0, :type :invoke, :f :get, :key \"1\", :value nil}\n";
        let mut random = String::new();
        let mut x: u64 = 1;
        while random.len() < 100_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let c = (b' ' + ((x >> 33) % 95) as u8) as char;
            random.push(if (x >> 20).is_multiple_of(70) { '\n' } else { c });
        }
        // Random text fails wherever a line first looks like EDN, or at the
        // end for holding no operation.
        assert!(parse(&random, Model::Kv).is_err());
        let cases: Vec<(String, Model, usize, &str)> = vec![
            (String::new(), Model::Kv, 1, "the file is empty"),
            // One endless line cannot slip past the memory cap.
            (format!("{invoke}{}", "[".repeat(100_000)), Model::Kv, 2, "the line is longer than 64 KiB"),
            ("\n  \n\t\n".into(), Model::Kv, 1, "the file holds no operation event, only 3 blank line(s)"),
            ("\n:nemesis :info :start nil\nhello\n".into(), Model::Kv, 2, "no client operation event in 3 line(s)"),
            // A completion whose value was cut off is not a read of nil.
            (format!("{invoke}{{:process 0, :type :ok, :f :get, :key \"1\"}}\n"), Model::Kv, 2, "missing :value"),
            (format!("{invoke}{{:process 0, :type :ok, :f :get, :key \"1\", :val"), Model::Kv, 2, "missing `}`"),
            (
                "INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO  jepsen.util - 0\t:ok\t:read\n".into(),
                Model::Register,
                2,
                "missing the value after the function",
            ),
            // Tagged literals, whole lines or inside a map, are not skipped.
            (format!("{invoke}#inst \"2020-01-01T00:00:00Z\"\n"), Model::Kv, 2, "a tagged or dispatch form `#inst`"),
            (format!("#foo {invoke}"), Model::Kv, 1, "a tagged or dispatch form `#foo`"),
            (
                "{:process 0, :type :invoke, :f :get, :key \"1\", :value nil, :time #inst \"2020\"}\n".to_string(),
                Model::Kv,
                1,
                "unsupported tagged or dispatch form `#inst`",
            ),
            // A history written as one EDN vector is not one map per line.
            (format!("[{}", invoke.trim_end()), Model::Kv, 1, "an EDN `[` collection"),
        ];
        for (text, model, line, message) in cases {
            let e = parse(&text, model).unwrap_err();
            assert_eq!(e.line, line, "{}: {e}", &text[..text.len().min(80)]);
            assert!(e.message.starts_with(message), "{}: {e}", &text[..text.len().min(80)]);
        }
    }

    #[test]
    fn reading_stops_at_the_deadline_and_the_memory_cap() {
        let text: String = (0..5000)
            .map(|i| format!("{{:process {i}, :type :invoke, :f :put, :key \"k\", :value \"{i}\"}}\n"))
            .collect();
        let past = Some(Instant::now());
        assert!(matches!(
            super::read(text.as_bytes(), Model::Kv, past, usize::MAX),
            Err(ReadError::OutOfTime { line: 1024 })
        ));
        let Err(ReadError::OutOfMemory { bytes, .. }) = super::read(text.as_bytes(), Model::Kv, None, 64 << 10) else {
            panic!("expected the memory cap to stop the read");
        };
        assert!(bytes > 64 << 10);
        let parsed = super::read(text.as_bytes(), Model::Kv, None, usize::MAX).unwrap();
        assert_eq!(parsed.ops.len(), 5000);
        assert!(parsed.bytes >= 5000 * size_of::<Operation>(), "{}", parsed.bytes);
    }

    fn shared_histories() -> PathBuf {
        std::env::var_os("FAULTLINE_SHARED_HISTORIES")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/histories"))
    }

    fn read(path: &Path) -> String {
        fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// Every history in the shared reference set gets its known verdict
    /// (those of Porcupine's test suite).
    #[test]
    fn shared_histories_get_their_known_verdicts() {
        let dir = shared_histories();
        assert!(dir.is_dir(), "shared histories not found at {} (set FAULTLINE_SHARED_HISTORIES)", dir.display());
        let mut cases: Vec<(PathBuf, Model, bool)> = Vec::new();

        let etcd = dir.join("etcd");
        let expected = read(&etcd.join("EXPECTED"));
        for line in expected.lines().filter(|l| !l.trim().is_empty()) {
            let (name, verdict) =
                line.split_once(char::is_whitespace).unwrap_or_else(|| panic!("bad EXPECTED line {line:?}"));
            let linearizable = match verdict.trim() {
                "linearizable" => true,
                "not-linearizable" => false,
                other => panic!("bad verdict {other:?} in EXPECTED"),
            };
            cases.push((etcd.join(name), Model::Register, linearizable));
        }
        let logs: Vec<String> = listing(&etcd).into_iter().filter(|n| n.ends_with(".log")).collect();
        let mut listed: Vec<String> =
            cases.iter().map(|(p, _, _)| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        listed.sort();
        assert_eq!(logs, listed, "etcd/EXPECTED must list exactly the etcd logs");

        let kv = dir.join("kv");
        let before = cases.len();
        for name in listing(&kv) {
            if let Some(stem) = name.strip_suffix(".txt") {
                let linearizable = stem.ends_with("-ok");
                assert!(linearizable || stem.ends_with("-bad"), "unexpected kv file {name}");
                cases.push((kv.join(name), Model::Kv, linearizable));
            }
        }
        assert!(cases.len() > before, "no kv histories in {}", kv.display());

        let mut mismatches = Vec::new();
        let mut parsing = Duration::ZERO;
        let mut checking = Duration::ZERO;
        for (path, model, linearizable) in &cases {
            let text = read(path);
            let started = Instant::now();
            let ops = parse(&text, *model).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            parsing += started.elapsed();
            let started = Instant::now();
            let verdict = check(*model, &ops, Duration::from_secs(60));
            checking += started.elapsed();
            let ok = match &verdict {
                Verdict::Linearizable => *linearizable,
                Verdict::NotLinearizable(w) => {
                    assert!(!w.ops.is_empty() && w.ops.len() <= 10, "{w:?}");
                    assert_eq!(w.partition.is_some(), *model == Model::Kv, "{w:?}");
                    !*linearizable
                }
                Verdict::Unknown(_) => false,
            };
            if !ok {
                mismatches.push(format!("{}: {verdict:?}", path.display()));
            }
        }
        eprintln!(
            "checked {} shared histories in {checking:?} (parsing took {parsing:?}); {} verdicts matched",
            cases.len(),
            cases.len() - mismatches.len()
        );
        assert!(mismatches.is_empty(), "wrong verdicts:\n{}", mismatches.join("\n"));
    }
}
