//! The hot-key checker: many writers on one key, and whether what they were
//! told adds up to one serial history. A put or delete that returns the item
//! it replaced (DynamoDB's `ReturnValues: ALL_OLD`) names its predecessor,
//! so the answers form a chain from the key's first state to the stored
//! item. Per key it checks that
//!
//! - no item was replaced twice (two calls answered 200 returned the same
//!   old image: a fork), and no call found the key empty more often than it
//!   was empty;
//! - every image names a write of this key that may have been applied (not
//!   one that failed, not another key's);
//! - every call answered 200 was replaced by a later call or is the stored
//!   item; a write nobody replaced can only have been overwritten by a call
//!   that returns no image (an update, a transaction, a batch, or a call
//!   whose outcome is unknown), and there must be enough of those (a lost
//!   update otherwise);
//! - the stored item is one write's whole item (the target says whether any
//!   attribute came from another write), the index holds exactly one entry
//!   for it, matching it, by the end of the index's settle window (an entry
//!   that matched only on a later read is lag, reported apart, not a
//!   violation);
//! - on a key only updated, the ids the updates appended to the item's list
//!   are every update answered 200, each once, none that failed, and the
//!   counter they added to equals the list's length;
//! - an item last written by a transaction holds the same write in every
//!   sibling item the transaction wrote with it;
//! - with a stream on the table: the key's records form one unbroken chain
//!   (each record replaced what the one before it left, the last leaves
//!   the stored item), every call answered 200 has exactly one record and a
//!   failed call none, and each record replaced what its call was told it
//!   replaced.
//!
//! A call whose outcome is unknown may or may not appear, as Jepsen holds it.
//! The order of the chain is not held against real time.
//!
//! The note also says how much contention the keys saw: how many write
//! calls were in flight on a key at once (the clients' view, from the
//! history). A spec's writers per round is what was asked; this is what
//! each key got.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use super::{
    describe_write, CheckContext, CheckResult, Checker, CheckerInfo, Judgement, Observer, Unmet, UnmetAt, WITNESSES,
};
use crate::history::{is_whole_value, parse_value, Merged, Observed, OpRecord, Outcome, Scope, ValueId};
use faultline_model::checks::CheckStatus;
use faultline_model::items::{IndexSettle, StoredItem, StreamChange};
use faultline_model::ops::OpKind;
use faultline_model::results::CellResult;
use faultline_spec::checkers::{check_of, judged_metric, violations_metric};
use faultline_spec::metric::{Args, GateMetric, MetricRef, Reads, Unit, Value};
use faultline_spec::KindInfo;

/// Most records the checker holds in memory; a longer history is `unknown`.
const MAX_RECORDS: usize = 20_000_000;

/// The hot-key checker: it reads the history again, each key's ops, and
/// holds them against the stored items.
pub struct HotKey;

const NAME: &str = "hot-key";

static METRICS: [GateMetric; 4] = [
    violations_metric(NAME, "hot_key_violations", "Violations found by `hot-key`: forks, lost updates, torn items, index entries still wrong at the end of the settle window, applied-twice updates, half-written transactions."),
    judged_metric(NAME, "hot_key_judged"),
    GateMetric {
        name: "index_lag",
        aliases: &[],
        description: "`hot-key` on a table with an index: the longest an index entry took to agree with its item after its first read (0 when none lagged). Unmeasured without an index.",
        unit: Unit::Ms,
        args: Args::None,
        reads: Reads::Checker(NAME),
        value: |m, cell, _| index_lag(m, cell, |lag| lag.longest_settle_ms),
    },
    GateMetric {
        name: "index_lagged",
        aliases: &[],
        description: "`hot-key` on a table with an index: entries that agreed with their item only on a later read (lag, not violations).",
        unit: Unit::Count,
        args: Args::None,
        reads: Reads::Checker(NAME),
        value: |m, cell, _| index_lag(m, cell, |lag| lag.settled_late as f64),
    },
];

/// How the checker saw an index catch up with its items.
fn index_lag(metric: &MetricRef, cell: &CellResult, pick: fn(&IndexLag) -> f64) -> Value {
    let check = check_of(cell, metric.metric.reads)?;
    if check.status == CheckStatus::Unknown {
        return Ok(None);
    }
    let lag = check.index.as_ref().ok_or("the hot-key checker judged no index entry (a table with `index:`)")?;
    if lag.entries == 0 {
        return Err("the hot-key checker judged 0 index entries".into());
    }
    Ok(Some(pick(lag)))
}

impl CheckerInfo for HotKey {
    fn name(&self) -> &'static str {
        NAME
    }
    fn judges(&self) -> &'static str {
        "written keys"
    }
    fn refuses(&self, op: OpKind) -> Option<&'static str> {
        (op == OpKind::Incr).then_some("the hot-key checker judges every op kind but incr (use update)")
    }
    fn lacks(&self, sends: &dyn Fn(OpKind) -> bool) -> Option<&'static str> {
        let writes = OpKind::ALL.iter().any(|k| (k.writes_value() || *k == OpKind::Del) && sends(*k));
        (!writes).then_some("the workload sends no write, so there is no key to judge")
    }
    fn requires(&self, target: &str, kind: &str, info: &dyn KindInfo) -> Option<Unmet> {
        (!info.returns_old_images()).then(|| Unmet {
            field: UnmetAt::Checkers,
            message: format!("the hot-key checker follows the old images writes return, which target `{target}` ({kind}) does not: use a dynamodb target"),
        })
    }
    fn metrics(&self) -> &'static [GateMetric] {
        &METRICS
    }
}

impl Checker for HotKey {
    fn reads_items(&self) -> bool {
        true
    }

    fn judge(&self, cx: &CheckContext<'_>, _seen: Option<Box<dyn Observer>>) -> Judgement {
        match (cx.stored.items, read_writes(cx.dir)) {
            (None, _) => self.unknown("the target did not report its stored items".into()),
            (_, Err(e)) => self.unknown(format!("cannot read the history: {e:#}")),
            (Some(items), Ok(writes)) => check(&writes, items, cx.scope, cx.stored.fresh_keys),
        }
        .into()
    }
}

/// The write records of each key, from the cell's history.
pub fn read_writes(dir: &Path) -> anyhow::Result<BTreeMap<u64, Vec<OpRecord>>> {
    let mut by_key: BTreeMap<u64, Vec<OpRecord>> = BTreeMap::new();
    let mut merged = Merged::open(dir)?;
    let mut held = 0usize;
    while let Some(r) = merged.next_record()? {
        if r.kind.writes_value() || r.kind == OpKind::Del {
            held += 1;
            anyhow::ensure!(held <= MAX_RECORDS, "more than {MAX_RECORDS} writes in one cell");
            by_key.entry(r.key).or_default().push(r);
        }
    }
    Ok(by_key)
}

pub use faultline_model::checks::IndexLag;

/// Whether a kind's answer carries the item it replaced.
fn returns_image(kind: OpKind) -> bool {
    matches!(kind, OpKind::Set | OpKind::Insert | OpKind::Del)
}

struct Judged {
    violations: u64,
    witnesses: Vec<String>,
}

impl Judged {
    fn violation(&mut self, text: String) {
        self.violations += 1;
        if self.witnesses.len() < WITNESSES {
            self.witnesses.push(text);
        }
    }
}

/// Judges every key the cell wrote (a write that may have been applied)
/// against its stored item (`items`, by key number, as the target read
/// them after the load). `fresh_keys`: the keys were new to the cell
/// (contention rounds), so an image of no write of this cell is a
/// violation rather than an earlier cell's item.
pub fn check(
    writes: &BTreeMap<u64, Vec<OpRecord>>,
    items: &HashMap<u64, StoredItem>,
    scope: Scope,
    fresh_keys: bool,
) -> CheckResult {
    let mut judged = Judged { violations: 0, witnesses: Vec::new() };
    let mut checked = 0;
    let mut stream_records = None;
    let mut out_of_order = 0;
    let mut peaks = Vec::new();
    let mut index = None;
    for (key, records) in writes {
        // Only reads: the key's stored item was not read, nothing to hold.
        // A key whose every write failed is held too: none of them may show.
        if !records.iter().any(|r| r.written.is_some()) {
            continue;
        }
        checked += 1;
        peaks.push(writes_in_flight_at_once(records));
        match items.get(key) {
            Some(item) => {
                check_key(*key, records, item, scope, fresh_keys, &mut judged);
                check_index(*key, item, &mut judged, &mut index);
                if let Some(changes) = &item.stream {
                    *stream_records.get_or_insert(0) += changes.len();
                    let reordered =
                        check_stream(*key, records, item.value.as_deref(), changes, scope, fresh_keys, &mut judged);
                    out_of_order += usize::from(reordered);
                }
            }
            None => judged.violation(format!("key {key}: its stored item was not read")),
        }
    }
    let mut result = HotKey.counted(checked, judged.violations, judged.witnesses);
    let mut notes = Vec::new();
    peaks.sort_unstable();
    if let (Some(median), Some(most)) = (peaks.get(peaks.len() / 2), peaks.last()) {
        notes.push(format!("write calls in flight at once on a key: median {median}, most {most}"));
    }
    if let Some(n) = stream_records {
        notes.push(format!("stream: {n} records judged, out of order on {out_of_order} keys"));
    }
    if let Some(lag) = &index {
        notes.push(lag.describe());
    }
    result.note = notes.join("; ");
    result.index = index;
    result
}

/// The most write calls in flight on one key at the same time, from their
/// start and end in the history (a call that ended as another started does
/// not overlap it).
fn writes_in_flight_at_once(records: &[OpRecord]) -> usize {
    let mut edges: Vec<(u64, i64)> = records
        .iter()
        .filter(|r| !matches!(r.kind, OpKind::Get | OpKind::Query))
        .flat_map(|r| [(r.start, 1), (r.end, -1)])
        .collect();
    // At equal times ends come first.
    edges.sort_unstable();
    let (mut now, mut most) = (0i64, 0i64);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}

fn check_key(key: u64, records: &[OpRecord], item: &StoredItem, scope: Scope, fresh: bool, out: &mut Judged) {
    let by_id: HashMap<ValueId, &OpRecord> = records.iter().filter_map(|r| Some((r.written?, r))).collect();
    let stored = item.value.as_deref().map(|v| parse_value(v, scope));
    let stored_id = match stored {
        Some(Observed::Write(id)) => Some(id),
        _ => None,
    };
    // Which calls answered 200 replaced each write, and how often the key was found empty.
    let mut replaced_by: HashMap<ValueId, Vec<&OpRecord>> = HashMap::new();
    let mut found_empty = 0u64;
    let mut emptied = 1u64; // the key's state before the cell
    for r in records.iter().filter(|r| r.outcome == Outcome::Ok && returns_image(r.kind)) {
        match r.observed {
            Observed::Write(id) => {
                replaced_by.entry(id).or_default().push(r);
                emptied += u64::from(r.kind == OpKind::Del);
            }
            Observed::Foreign if fresh => out.violation(format!(
                "key {key}: {} returned an item no call of this cell wrote, on a key new to the cell",
                super::describe(r)
            )),
            // A delete of an absent item leaves it absent.
            Observed::Nil | Observed::Foreign if r.kind == OpKind::Del => {}
            // An earlier cell's item counts as the key's first state.
            Observed::Nil | Observed::Foreign => found_empty += 1,
            Observed::Nothing => out
                .violation(format!("key {key}: {} was answered 200 without the item it replaced", super::describe(r))),
        }
    }
    // A write shown to have been applied: answered 200, or its item was
    // replaced or is stored.
    let shown = |r: &OpRecord| {
        r.outcome == Outcome::Ok || r.written.is_some_and(|id| replaced_by.contains_key(&id) || Some(id) == stored_id)
    };
    // Calls that may have replaced an item without naming it: writes that
    // return no image and were applied, writes of unknown outcome shown to
    // have been applied, and deletes of unknown outcome (which may have been).
    let mut silent = 0u64;
    for r in records.iter().filter(|r| r.outcome != Outcome::Fail) {
        let no_image = !returns_image(r.kind) || r.outcome == Outcome::Unknown;
        if no_image && (shown(r) || r.kind == OpKind::Del) {
            silent += 1;
            emptied += u64::from(r.kind == OpKind::Del);
        }
    }
    if found_empty > emptied {
        out.violation(format!(
            "key {key}: {found_empty} calls answered 200 found it empty, but it was empty only {emptied} time(s): writes forked"
        ));
    }
    for (id, replacers) in &replaced_by {
        match by_id.get(id) {
            None => out.violation(format!(
                "key {key}: a call returned {} as the item it replaced, which was not written to this key",
                describe_write(*id)
            )),
            Some(w) if w.outcome == Outcome::Fail => out.violation(format!(
                "key {key}: a call returned {} as the item it replaced, but that write failed",
                describe_write(*id)
            )),
            _ => {}
        }
        if replacers.len() > 1 {
            let calls: Vec<String> = replacers.iter().map(|r| super::describe(r)).collect();
            out.violation(format!(
                "key {key}: {} calls answered 200 each returned {} as the item they replaced (a duplicate image): {}",
                replacers.len(),
                describe_write(*id),
                calls.join(", ")
            ));
        }
    }
    check_chain(key, records, &replaced_by, &shown, out);
    if let Some(id) = stored_id {
        match by_id.get(&id) {
            Some(w) if w.outcome == Outcome::Fail => {
                out.violation(format!("key {key}: the stored item is {}, a write that failed", describe_write(id)))
            }
            None => out.violation(format!("key {key}: the stored item is {}, never written to it", describe_write(id))),
            Some(w) => {
                let v = item.value.as_deref().unwrap_or_default();
                if !is_whole_value(v, scope.run, id, w.written_len as usize) {
                    out.violation(format!(
                        "key {key}: the stored item's value is not {}'s whole value ({} of {} bytes, or other bytes)",
                        describe_write(id),
                        v.len(),
                        w.written_len
                    ));
                }
            }
        }
        if let Some(r) = replaced_by.get(&id) {
            out.violation(format!(
                "key {key}: the stored item is {}, but {} replaced it (lost update)",
                describe_write(id),
                super::describe(r[0])
            ));
        }
    }
    // Writes answered 200 that nobody replaced and that are not stored.
    let dangling: Vec<ValueId> = records
        .iter()
        .filter(|r| r.outcome == Outcome::Ok)
        .filter_map(|r| r.written)
        .filter(|id| !replaced_by.contains_key(id) && Some(*id) != stored_id)
        .collect();
    if dangling.len() as u64 > silent {
        let names: Vec<String> = dangling.iter().take(5).map(|id| describe_write(*id)).collect();
        out.violation(format!(
            "key {key}: {} writes answered 200 are neither the stored item nor replaced by any call, and only {silent} call(s) could have overwritten them unseen (lost update): {}",
            dangling.len(),
            names.join(", ")
        ));
    }
    let answered = records.iter().any(|r| r.outcome == Outcome::Ok && r.kind != OpKind::Del);
    let deletes = records.iter().any(|r| r.kind == OpKind::Del && r.outcome != Outcome::Fail);
    if item.value.is_none() && answered && !deletes {
        out.violation(format!(
            "key {key}: the item is absent, though writes to it were answered 200 and none deleted it"
        ));
    }
    if stored == Some(Observed::Foreign) && answered {
        out.violation(format!(
            "key {key}: the stored item was written by none of this cell's calls, though some were answered 200"
        ));
    }
    if let Some(why) = &item.torn {
        out.violation(format!("key {key}: the stored item is torn: {why}"));
    }
    check_updates(key, records, item, scope, out);
    if let (Some(id), Some(w)) = (stored_id, stored_id.and_then(|id| by_id.get(&id))) {
        if w.kind == OpKind::Transact {
            for (i, sibling) in item.siblings.iter().enumerate() {
                if sibling.as_deref() != item.value.as_deref() {
                    out.violation(format!(
                        "key {key}: the stored item is {} of a transaction, but its sibling item {} holds {}",
                        describe_write(id),
                        i + 1,
                        sibling.as_deref().map_or("nothing".into(), |v| describe_value(v, scope))
                    ));
                }
            }
        }
    }
}

/// Every write answered 200 lies on a chain that starts at the key's first
/// state (a call that found it empty) or at a call that replaced an item
/// unseen: following who replaced whom from those starts reaches it. One
/// that is not reached hangs off a cycle of images (a replaced b, b
/// replaced a), which no serial order allows.
fn check_chain(
    key: u64,
    records: &[OpRecord],
    replaced_by: &HashMap<ValueId, Vec<&OpRecord>>,
    shown: &dyn Fn(&OpRecord) -> bool,
    out: &mut Judged,
) {
    let starts = records.iter().filter(|r| r.outcome != Outcome::Fail).filter(|r| {
        let found_empty = r.outcome == Outcome::Ok && matches!(r.observed, Observed::Nil | Observed::Foreign);
        let unseen = (!returns_image(r.kind) || r.outcome == Outcome::Unknown) && shown(r);
        found_empty || unseen
    });
    let mut reached: HashSet<ValueId> = HashSet::new();
    let mut next: Vec<ValueId> = starts.filter_map(|r| r.written).collect();
    while let Some(id) = next.pop() {
        if reached.insert(id) {
            next.extend(replaced_by.get(&id).into_iter().flatten().filter_map(|r| r.written));
        }
    }
    let cut_off: Vec<ValueId> = records
        .iter()
        .filter(|r| r.outcome == Outcome::Ok)
        .filter_map(|r| r.written)
        .filter(|id| !reached.contains(id))
        .collect();
    if let Some(first) = cut_off.first() {
        out.violation(format!(
            "key {key}: {} writes answered 200 are on no chain from the key's first state (their images form a cycle), e.g. {}",
            cut_off.len(),
            describe_write(*first)
        ));
    }
}

/// The key's stream records against its calls and its stored item. A record
/// names its write by the value of the item it left (`new`).
fn check_stream(
    key: u64,
    records: &[OpRecord],
    stored: Option<&[u8]>,
    changes: &[StreamChange],
    scope: Scope,
    fresh: bool,
    out: &mut Judged,
) -> bool {
    let seen = |v: &Option<Vec<u8>>| v.as_deref().map_or(Observed::Nil, |v| parse_value(v, scope));
    // On keys an earlier cell wrote, that cell's records come first.
    let changes = match fresh {
        true => changes,
        false => {
            let first = changes.iter().position(|c| matches!(seen(&c.new), Observed::Write(_)));
            &changes[first.unwrap_or(changes.len())..]
        }
    };
    let describe = |o: Observed| match o {
        Observed::Write(id) => describe_write(id),
        Observed::Nil | Observed::Nothing => "no item".to_string(),
        Observed::Foreign => "an item of no write of this cell".to_string(),
    };
    let links: Vec<(Observed, Observed)> = changes.iter().map(|c| (seen(&c.old), seen(&c.new))).collect();
    let breaks: Vec<usize> = (1..links.len()).filter(|&i| links[i].0 != links[i - 1].1).collect();
    // Records that chain only in another order: the stream's order is not
    // the order the item changed in (one violation for the key).
    let reordered = if breaks.is_empty() { None } else { chain_order(&links) };
    let out_of_order = reordered.is_some();
    match &reordered {
        Some(_) => {
            let i = breaks[0];
            out.violation(format!(
                "key {key}: the stream's records are out of order (record {} replaced {}, but record {} left {}); taken in another order they form one chain, so the stream's order is not the order the item changed in",
                i + 1,
                describe(links[i].0),
                i,
                describe(links[i - 1].1)
            ));
        }
        None => {
            for &i in &breaks {
                out.violation(format!(
                    "key {key}: stream record {} replaced {}, but record {} left {} (the stream's chain is broken)",
                    i + 1,
                    describe(links[i].0),
                    i,
                    describe(links[i - 1].1)
                ));
            }
        }
    }
    if let Some(first) = changes.first().filter(|_| fresh) {
        if first.old.is_some() {
            out.violation(format!(
                "key {key}: the first stream record of a key new to the cell replaced {}",
                describe(seen(&first.old))
            ));
        }
    }
    let stored_seen = stored.map_or(Observed::Nil, |v| parse_value(v, scope));
    let last_left = match &reordered {
        Some(order) => order.last().map(|&i| links[i].1),
        None => links.last().map(|l| l.1),
    };
    match last_left {
        Some(left) if left != stored_seen => out.violation(format!(
            "key {key}: the stream's last record left {}, but the stored item is {}",
            describe(left),
            describe(stored_seen)
        )),
        None if records.iter().any(|r| r.outcome == Outcome::Ok) => {
            out.violation(format!("key {key}: calls were answered 200 but the stream holds no record of the key"))
        }
        _ => {}
    }
    // Each write's record (by the item it left), and the removals.
    let mut record_of: HashMap<ValueId, Vec<&StreamChange>> = HashMap::new();
    let mut removals = 0usize;
    for change in changes {
        match seen(&change.new) {
            Observed::Write(id) => record_of.entry(id).or_default().push(change),
            Observed::Nil | Observed::Nothing => removals += 1,
            Observed::Foreign => {
                out.violation(format!("key {key}: a stream record left an item no call of this cell wrote"))
            }
        }
    }
    let by_id: HashMap<ValueId, &OpRecord> = records.iter().filter_map(|r| Some((r.written?, r))).collect();
    for id in record_of.keys().filter(|id| !by_id.contains_key(id)) {
        out.violation(format!(
            "key {key}: the stream records {}, which was not written to this key",
            describe_write(*id)
        ));
    }
    for r in records {
        let Some(id) = r.written else { continue };
        let found = record_of.get(&id).map_or(&[][..], Vec::as_slice);
        match (r.outcome, found.len()) {
            (Outcome::Fail, 0) | (Outcome::Ok, 1) | (Outcome::Unknown, 0 | 1) => {}
            (Outcome::Fail, _) => out.violation(format!(
                "key {key}: {} failed (not applied), but the stream records it",
                super::describe(r)
            )),
            (Outcome::Ok, 0) => out.violation(format!(
                "key {key}: {} was answered 200, but the stream has no record of it",
                super::describe(r)
            )),
            (_, n) => out.violation(format!("key {key}: the stream records {} {n} times", super::describe(r))),
        }
        // What the caller was told it replaced is what its record replaced.
        if let (Outcome::Ok, true, [change]) = (r.outcome, returns_image(r.kind), found) {
            if r.observed != Observed::Nothing && r.observed != seen(&change.old) {
                out.violation(format!(
                    "key {key}: {} was told it replaced {}, but its stream record replaced {}",
                    super::describe(r),
                    describe(r.observed),
                    describe(seen(&change.old))
                ));
            }
        }
    }
    let deletes = records.iter().filter(|r| r.kind == OpKind::Del && r.outcome != Outcome::Fail).count();
    if removals > deletes {
        out.violation(format!(
            "key {key}: the stream holds {removals} removals of the item, but only {deletes} deletes may have been applied"
        ));
    }
    out_of_order
}

/// The order in which `links` (each record's replaced and left item) form
/// one chain, if they do: one record starts it (it replaced what no other
/// record left) and each next record is the only one that replaced what
/// the one before it left.
fn chain_order(links: &[(Observed, Observed)]) -> Option<Vec<usize>> {
    let mut by_replaced: HashMap<Observed, Vec<usize>> = HashMap::new();
    for (i, link) in links.iter().enumerate() {
        by_replaced.entry(link.0).or_default().push(i);
    }
    let left: HashSet<Observed> = links.iter().map(|l| l.1).collect();
    let starts: Vec<usize> = (0..links.len()).filter(|&i| !left.contains(&links[i].0)).collect();
    let [start] = starts[..] else { return None };
    let mut order = vec![start];
    let mut used = vec![false; links.len()];
    used[start] = true;
    while order.len() < links.len() {
        let after = links[*order.last()?].1;
        let next: Vec<usize> = by_replaced.get(&after)?.iter().copied().filter(|&j| !used[j]).collect();
        let [next] = next[..] else { return None };
        used[next] = true;
        order.push(next);
    }
    Some(order)
}

fn describe_value(v: &[u8], scope: Scope) -> String {
    match parse_value(v, scope) {
        Observed::Write(id) => describe_write(id),
        _ => "an item of no write of this cell".into(),
    }
}

/// The key's index entries against its item, once they had the settle
/// window to catch up: wrong at the end is a violation (said with the
/// window, so it reads as what stayed wrong), right only on a later read
/// is lag.
fn check_index(key: u64, item: &StoredItem, out: &mut Judged, lag: &mut Option<IndexLag>) {
    let Some(entries) = &item.index_entries else { return };
    let settle = item.index_settle.unwrap_or_default();
    let lag = lag.get_or_insert_with(IndexLag::default);
    lag.entries += 1;
    lag.window_ms = lag.window_ms.max(settle.window.as_secs_f64() * 1e3);
    let problem = match (&item.value, entries.as_slice()) {
        (None, []) => None,
        (None, _) => Some(format!("the item is absent but the index holds {} entries for it", entries.len())),
        (Some(_), []) => Some("the index holds no entry for the stored item".to_string()),
        (Some(v), [entry]) if entry.as_ref() == Some(v) => None,
        (Some(_), [_]) => Some("the index entry does not match the stored item".to_string()),
        (Some(_), _) => Some(format!("the index holds {} entries for one item", entries.len())),
    };
    match (problem, settle) {
        (Some(p), IndexSettle { window, .. }) => {
            lag.still_wrong += 1;
            let window = faultline_model::units::format_duration(window);
            out.violation(format!("key {key}: {p}, still when its {window} settle window ended (table.index.settle)"))
        }
        (None, IndexSettle { late: Some(after), .. }) => {
            lag.settled_late += 1;
            lag.longest_settle_ms = lag.longest_settle_ms.max(after.as_secs_f64() * 1e3);
        }
        (None, _) => {}
    }
}

/// On a key only updated: the ids appended are the updates that may have
/// been applied, every one answered 200 among them, each once, and the
/// counter agrees.
fn check_updates(key: u64, records: &[OpRecord], item: &StoredItem, scope: Scope, out: &mut Judged) {
    if records.iter().any(|r| r.kind != OpKind::Update && r.outcome != Outcome::Fail) {
        return; // a put replaced the list along with the item
    }
    let updated = records.iter().any(|r| r.outcome == Outcome::Ok);
    let Some((counter, appended)) = &item.applied else {
        if updated {
            out.violation(format!("key {key}: updates were answered 200 but the item holds no counter and id list"));
        }
        return;
    };
    let mut seen = HashSet::new();
    for v in appended {
        match parse_value(v, scope) {
            Observed::Write(id) => {
                if !seen.insert(id) {
                    out.violation(format!("key {key}: update {} was applied twice", describe_write(id)));
                }
                match records.iter().find(|r| r.written == Some(id)) {
                    Some(r) if r.outcome == Outcome::Fail => {
                        out.violation(format!("key {key}: update {} failed but was applied", describe_write(id)))
                    }
                    None => out.violation(format!("key {key}: the item lists {}, no update of it", describe_write(id))),
                    _ => {}
                }
            }
            _ => out.violation(format!("key {key}: the item lists an update of no call of this cell")),
        }
    }
    let lost: Vec<ValueId> = records
        .iter()
        .filter(|r| r.outcome == Outcome::Ok)
        .filter_map(|r| r.written)
        .filter(|id| !seen.contains(id))
        .collect();
    if let Some(first) = lost.first() {
        out.violation(format!(
            "key {key}: {} updates answered 200 are missing from the item (lost updates), e.g. {}",
            lost.len(),
            describe_write(*first)
        ));
    }
    if *counter != appended.len() as i64 {
        out.violation(format!(
            "key {key}: the counter says {counter} updates, the list holds {} (an ADD and a list_append of one call disagree)",
            appended.len()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::write_value;
    use std::time::Duration;

    const SCOPE: Scope = Scope { run: 7, cell: 1 };
    const KEY: u64 = 3;

    fn id(writer: u16, seq: u32) -> ValueId {
        ValueId { cell: 1, writer, seq }
    }

    fn value(id: ValueId) -> Vec<u8> {
        let mut v = Vec::new();
        write_value(SCOPE.run, id, 40, &mut v);
        v
    }

    /// A call on `KEY`: what it wrote (if anything) and the image it returned.
    fn call(kind: OpKind, written: Option<ValueId>, outcome: Outcome, observed: Observed) -> OpRecord {
        OpRecord { start: 0, end: 1, key: KEY, kind, outcome, written, written_len: 40, member: 0, observed }
    }

    fn put(w: ValueId, replaced: Option<ValueId>) -> OpRecord {
        call(OpKind::Set, Some(w), Outcome::Ok, replaced.map_or(Observed::Nil, Observed::Write))
    }

    fn item(stored: Option<ValueId>) -> StoredItem {
        StoredItem {
            value: stored.map(value),
            torn: None,
            index_entries: Some(stored.map(value).into_iter().map(Some).collect()),
            index_settle: Some(IndexSettle { window: Duration::from_secs(30), late: None }),
            applied: None,
            siblings: Vec::new(),
            stream: None,
        }
    }

    fn judge(records: Vec<OpRecord>, item: StoredItem) -> CheckResult {
        let writes: BTreeMap<u64, Vec<OpRecord>> = [(KEY, records)].into_iter().collect();
        let items: HashMap<u64, StoredItem> = [(KEY, item)].into_iter().collect();
        check(&writes, &items, SCOPE, true)
    }

    #[test]
    fn one_unbroken_chain_ending_at_the_stored_item_holds() {
        let (a, b, c) = (id(0, 0), id(1, 0), id(2, 0));
        let r = judge(vec![put(a, None), put(b, Some(a)), put(c, Some(b))], item(Some(c)));
        assert_eq!((r.violations, r.checked), (0, 1), "{:?}", r.witnesses);
        // A call of unknown outcome that may have landed between b and c, unseen.
        let u = id(3, 0);
        let unknown = call(OpKind::Set, Some(u), Outcome::Unknown, Observed::Nothing);
        let r = judge(vec![put(a, None), put(b, Some(a)), unknown, put(c, Some(u))], item(Some(c)));
        assert_eq!(r.violations, 0, "{:?}", r.witnesses);
        // Sheds (failed calls) appear nowhere.
        let shed = call(OpKind::Set, Some(id(4, 0)), Outcome::Fail, Observed::Nothing);
        assert_eq!(judge(vec![put(a, None), shed], item(Some(a))).violations, 0);
    }

    #[test]
    fn a_fork_two_calls_replacing_one_item_is_a_violation() {
        let (a, b, c) = (id(0, 0), id(1, 0), id(2, 0));
        let r = judge(vec![put(a, None), put(b, Some(a)), put(c, Some(a))], item(Some(c)));
        assert!(r.violations >= 1);
        assert!(r.witnesses.iter().any(|w| w.contains("duplicate image")), "{:?}", r.witnesses);
        // Two calls both found the key empty.
        let r = judge(vec![put(a, None), put(b, None)], item(Some(b)));
        assert!(r.witnesses.iter().any(|w| w.contains("found it empty")), "{:?}", r.witnesses);
    }

    #[test]
    fn a_lost_update_is_a_violation() {
        let (a, b) = (id(0, 0), id(1, 0));
        // b replaced a, yet a is stored.
        let r = judge(vec![put(a, None), put(b, Some(a))], item(Some(a)));
        assert!(r.witnesses.iter().any(|w| w.contains("lost update")), "{:?}", r.witnesses);
        // b answered 200 but nothing replaced it and c is stored.
        let c = id(2, 0);
        let r = judge(vec![put(a, None), put(b, Some(a)), put(c, Some(a))], item(Some(c)));
        assert!(r.witnesses.iter().any(|w| w.contains("neither the stored item")), "{:?}", r.witnesses);
        // Every write answered 200 and the item is gone.
        let r = judge(vec![put(a, None)], item(None));
        assert!(r.witnesses.iter().any(|w| w.contains("absent")), "{:?}", r.witnesses);
    }

    #[test]
    fn an_image_of_a_failed_write_or_a_failed_write_stored_is_a_violation() {
        let (a, b) = (id(0, 0), id(1, 0));
        let failed = call(OpKind::Set, Some(a), Outcome::Fail, Observed::Nothing);
        let r = judge(vec![failed, put(b, Some(a))], item(Some(b)));
        assert!(r.witnesses.iter().any(|w| w.contains("that write failed")), "{:?}", r.witnesses);
        let r = judge(vec![failed, put(b, None)], item(Some(a)));
        assert!(r.witnesses.iter().any(|w| w.contains("a write that failed")), "{:?}", r.witnesses);
    }

    #[test]
    fn the_note_says_how_many_writes_were_in_flight_on_a_key_at_once() {
        let at = |w: ValueId, start, end| OpRecord { start, end, ..put(w, None) };
        let (a, b, c) = (id(0, 0), id(1, 0), id(2, 0));
        // a and b overlap; c starts as a ends; a read alongside is no writer.
        let read = OpRecord { start: 0, end: 50, ..call(OpKind::Get, None, Outcome::Ok, Observed::Nil) };
        assert_eq!(writes_in_flight_at_once(&[at(a, 0, 10), at(b, 5, 20), at(c, 10, 30), read]), 2);
        assert_eq!(writes_in_flight_at_once(&[at(a, 0, 10), at(b, 10, 20)]), 1);
        let r = judge(vec![put(a, None), put(b, Some(a))], item(Some(b)));
        assert!(r.note.contains("in flight at once on a key: median"), "{}", r.note);
    }

    #[test]
    fn a_key_whose_every_write_failed_holds_none_of_them() {
        let (a, b) = (id(0, 0), id(1, 0));
        let shed = |w| call(OpKind::Set, Some(w), Outcome::Fail, Observed::Nothing);
        let r = judge(vec![shed(a), shed(b)], streamed(None, vec![]));
        assert_eq!((r.violations, r.checked), (0, 1), "{:?}", r.witnesses);
        let r = judge(vec![shed(a), shed(b)], streamed(Some(b), vec![change(None, Some(b))]));
        assert!(r.witnesses.iter().any(|w| w.contains("a write that failed")), "{:?}", r.witnesses);
        assert!(r.witnesses.iter().any(|w| w.contains("failed (not applied)")), "{:?}", r.witnesses);
    }

    #[test]
    fn a_torn_item_is_a_violation() {
        let a = id(0, 0);
        let mut stored = item(Some(a));
        stored.torn = Some("attribute `w` names writer 1, `v` writer 0".into());
        let r = judge(vec![put(a, None)], stored);
        assert_eq!(r.violations, 1);
        assert!(r.witnesses[0].contains("torn"), "{:?}", r.witnesses);
    }

    #[test]
    fn two_index_entries_or_a_stale_one_are_violations() {
        let (a, b) = (id(0, 0), id(1, 0));
        let mut stored = item(Some(b));
        stored.index_entries = Some(vec![Some(value(a)), Some(value(b))]);
        let r = judge(vec![put(a, None), put(b, Some(a))], stored);
        assert!(r.witnesses.iter().any(|w| w.contains("2 entries")), "{:?}", r.witnesses);
        let mut stored = item(Some(b));
        stored.index_entries = Some(vec![Some(value(a))]);
        let r = judge(vec![put(a, None), put(b, Some(a))], stored);
        assert!(r.witnesses.iter().any(|w| w.contains("does not match")), "{:?}", r.witnesses);
        let mut stored = item(Some(b));
        stored.index_entries = Some(vec![]);
        assert_eq!(judge(vec![put(a, None), put(b, Some(a))], stored).violations, 1);
    }

    #[test]
    fn an_index_entry_that_matched_late_is_lag_and_one_still_wrong_a_violation() {
        let (a, b) = (id(0, 0), id(1, 0));
        let calls = || vec![put(a, None), put(b, Some(a))];
        let settled_after =
            |secs: f64| IndexSettle { window: Duration::from_secs(30), late: Some(Duration::from_secs_f64(secs)) };
        // Two keys whose entries agreed only when read again: lag, no violation.
        let mut late = item(Some(b));
        late.index_settle = Some(settled_after(5.8));
        let mut later = item(Some(b));
        later.index_settle = Some(settled_after(0.4));
        let writes: BTreeMap<u64, Vec<OpRecord>> = [(1, calls()), (2, calls()), (3, calls())].into_iter().collect();
        let items: HashMap<u64, StoredItem> = [(1, late), (2, later), (3, item(Some(b)))].into_iter().collect();
        let r = check(&writes, &items, SCOPE, true);
        assert_eq!(r.violations, 0, "{:?}", r.witnesses);
        let lag = r.index.clone().expect("the table has an index");
        assert_eq!((lag.entries, lag.settled_late, lag.still_wrong), (3, 2, 0), "{lag:?}");
        assert_eq!((lag.longest_settle_ms, lag.window_ms), (5800.0, 30_000.0));
        assert!(r.note.contains("2 lagged") && r.note.contains("lag, not loss"), "{}", r.note);
        // Still without an entry when the window ended: a violation, said with the window.
        let mut stuck = item(Some(b));
        stuck.index_entries = Some(vec![]);
        let mut late = item(Some(b));
        late.index_settle = Some(settled_after(2.0));
        let items: HashMap<u64, StoredItem> = [(1, stuck), (2, late), (3, item(Some(b)))].into_iter().collect();
        let r = check(&writes, &items, SCOPE, true);
        assert_eq!(r.violations, 1, "{:?}", r.witnesses);
        assert!(r.witnesses[0].contains("still when its 30s settle window ended"), "{:?}", r.witnesses);
        let lag = r.index.expect("the table has an index");
        assert_eq!((lag.settled_late, lag.still_wrong, lag.longest_settle_ms), (1, 1, 2000.0));
        // No index on the table: nothing about one.
        let mut plain = item(Some(b));
        (plain.index_entries, plain.index_settle) = (None, None);
        assert_eq!(judge(calls(), plain).index, None);
    }

    #[test]
    fn updates_are_each_applied_once_and_counted() {
        let (a, b, c) = (id(0, 0), id(1, 0), id(2, 0));
        let update = |w, outcome| call(OpKind::Update, Some(w), outcome, Observed::Nothing);
        let with = |counter: i64, ids: &[ValueId]| {
            let mut i = item(ids.last().copied());
            i.applied = Some((counter, ids.iter().map(|id| value(*id)).collect()));
            i
        };
        let calls = || vec![update(a, Outcome::Ok), update(b, Outcome::Ok), update(c, Outcome::Fail)];
        assert_eq!(judge(calls(), with(2, &[a, b])).violations, 0);
        // A lost ADD: the counter says 1 while both updates were answered 200.
        let r = judge(calls(), with(1, &[a]));
        assert!(r.witnesses.iter().any(|w| w.contains("lost updates")), "{:?}", r.witnesses);
        let r = judge(calls(), with(3, &[a, b]));
        assert!(r.witnesses.iter().any(|w| w.contains("counter says 3")), "{:?}", r.witnesses);
        let r = judge(calls(), with(3, &[a, b, c]));
        assert!(r.witnesses.iter().any(|w| w.contains("failed but was applied")), "{:?}", r.witnesses);
        let r = judge(calls(), with(3, &[a, b, b]));
        assert!(r.witnesses.iter().any(|w| w.contains("applied twice")), "{:?}", r.witnesses);
    }

    #[test]
    fn a_transaction_is_in_every_item_it_wrote_or_in_none() {
        let (a, b) = (id(0, 0), id(1, 0));
        let transact = |w| call(OpKind::Transact, Some(w), Outcome::Ok, Observed::Nothing);
        let mut stored = item(Some(b));
        stored.siblings = vec![Some(value(b)), Some(value(b))];
        assert_eq!(judge(vec![transact(a), transact(b)], stored).violations, 0);
        let mut stored = item(Some(b));
        stored.siblings = vec![Some(value(b)), Some(value(a))];
        let r = judge(vec![transact(a), transact(b)], stored);
        assert!(r.witnesses.iter().any(|w| w.contains("sibling item 2")), "{:?}", r.witnesses);
    }

    #[test]
    fn deletes_empty_the_key_for_the_next_put() {
        let (a, b) = (id(0, 0), id(1, 0));
        let delete = call(OpKind::Del, None, Outcome::Ok, Observed::Write(a));
        // a, deleted, then b finds the key empty: one chain.
        assert_eq!(judge(vec![put(a, None), delete, put(b, None)], item(Some(b))).violations, 0);
        // The delete is last: the item is absent, as it should be.
        assert_eq!(judge(vec![put(a, None), delete], item(None)).violations, 0);
    }

    #[test]
    fn a_cycle_of_images_is_on_no_chain() {
        let (a, b, c) = (id(0, 0), id(1, 0), id(2, 0));
        // a replaced b and b replaced a, beside an honest chain to c.
        let r = judge(vec![put(a, Some(b)), put(b, Some(a)), put(c, None)], item(Some(c)));
        assert!(r.witnesses.iter().any(|w| w.contains("no chain")), "{:?}", r.witnesses);
    }

    #[test]
    fn an_unknown_write_that_shows_nowhere_hides_no_lost_update() {
        let (a, b) = (id(0, 0), id(1, 0));
        // a was answered 200, then lost: b (unknown, never seen) cannot
        // have overwritten it, since nothing shows b was applied.
        let unknown = call(OpKind::Set, Some(b), Outcome::Unknown, Observed::Nothing);
        let r = judge(vec![put(a, None), unknown], item(None));
        assert!(r.violations >= 1, "{:?}", r.witnesses);
        // Once b is stored it was applied, and overwrote a unseen: one chain.
        let unknown = call(OpKind::Set, Some(b), Outcome::Unknown, Observed::Nothing);
        assert_eq!(judge(vec![put(a, None), unknown], item(Some(b))).violations, 0);
    }

    #[test]
    fn an_answer_without_an_image_or_with_a_foreign_one_is_a_violation() {
        let a = id(0, 0);
        let blind = call(OpKind::Set, Some(a), Outcome::Ok, Observed::Nothing);
        let r = judge(vec![blind], item(Some(a)));
        assert!(r.witnesses.iter().any(|w| w.contains("without the item it replaced")), "{:?}", r.witnesses);
        // On a key new to the cell, an image no call wrote came from nowhere.
        let foreign = call(OpKind::Set, Some(a), Outcome::Ok, Observed::Foreign);
        let r = judge(vec![foreign], item(Some(a)));
        assert!(r.witnesses.iter().any(|w| w.contains("no call of this cell wrote")), "{:?}", r.witnesses);
    }

    #[test]
    fn a_truncated_stored_value_is_not_a_whole_item() {
        let a = id(0, 0);
        let mut stored = item(Some(a));
        stored.value.as_mut().unwrap().truncate(35);
        let r = judge(vec![put(a, None)], stored);
        assert!(r.witnesses.iter().any(|w| w.contains("whole value")), "{:?}", r.witnesses);
    }

    #[test]
    fn updates_answered_without_a_counter_on_the_item_are_a_violation() {
        let a = id(0, 0);
        let update = call(OpKind::Update, Some(a), Outcome::Ok, Observed::Nothing);
        let r = judge(vec![update], item(Some(a)));
        assert!(r.witnesses.iter().any(|w| w.contains("no counter")), "{:?}", r.witnesses);
    }

    #[test]
    fn keys_only_read_are_not_judged() {
        let read = call(OpKind::Get, None, Outcome::Ok, Observed::Nil);
        let writes: BTreeMap<u64, Vec<OpRecord>> = [(KEY, vec![read])].into_iter().collect();
        let r = check(&writes, &HashMap::new(), SCOPE, true);
        assert_eq!((r.checked, r.violations), (0, 0));
    }

    fn change(old: Option<ValueId>, new: Option<ValueId>) -> StreamChange {
        StreamChange { old: old.map(value), new: new.map(value) }
    }

    fn streamed(stored: Option<ValueId>, changes: Vec<StreamChange>) -> StoredItem {
        StoredItem { stream: Some(changes), ..item(stored) }
    }

    #[test]
    fn a_stream_whose_records_chain_to_the_stored_item_holds() {
        let (a, b, c) = (id(0, 0), id(1, 0), id(2, 0));
        let shed = call(OpKind::Set, Some(id(4, 0)), Outcome::Fail, Observed::Nothing);
        let calls = vec![put(a, None), put(b, Some(a)), shed, put(c, Some(b))];
        let stream = vec![change(None, Some(a)), change(Some(a), Some(b)), change(Some(b), Some(c))];
        let r = judge(calls, streamed(Some(c), stream));
        assert_eq!(r.violations, 0, "{:?}", r.witnesses);
        assert!(r.note.contains("3 records"), "{}", r.note);
    }

    #[test]
    fn a_broken_stream_chain_or_a_record_that_disagrees_with_the_answer_is_a_violation() {
        let (a, b) = (id(0, 0), id(1, 0));
        let calls = || vec![put(a, None), put(b, Some(a))];
        // b's record says it found the key empty, while b was told a.
        let r = judge(calls(), streamed(Some(b), vec![change(None, Some(a)), change(None, Some(b))]));
        assert!(r.witnesses.iter().any(|w| w.contains("chain is broken")), "{:?}", r.witnesses);
        assert!(r.witnesses.iter().any(|w| w.contains("was told it replaced")), "{:?}", r.witnesses);
        // The last record does not leave the stored item.
        let r = judge(calls(), streamed(Some(a), vec![change(None, Some(a)), change(Some(a), Some(b))]));
        assert!(r.witnesses.iter().any(|w| w.contains("stream's last record left")), "{:?}", r.witnesses);
    }

    #[test]
    fn records_that_chain_only_in_another_order_are_one_out_of_order_violation() {
        let (a, b, c) = (id(0, 0), id(1, 0), id(2, 0));
        let calls = vec![put(a, None), put(b, Some(a)), put(c, Some(b))];
        let stream = vec![change(None, Some(a)), change(Some(b), Some(c)), change(Some(a), Some(b))];
        let r = judge(calls, streamed(Some(c), stream));
        assert_eq!(r.violations, 1, "{:?}", r.witnesses);
        assert!(r.witnesses[0].contains("out of order"), "{:?}", r.witnesses);
        assert!(r.note.contains("out of order on 1 keys"), "{}", r.note);
    }

    #[test]
    fn a_missing_duplicate_or_failed_write_record_is_a_violation() {
        let (a, b, c) = (id(0, 0), id(1, 0), id(2, 0));
        // b answered 200 has no record.
        let r = judge(vec![put(a, None), put(b, Some(a))], streamed(Some(b), vec![change(None, Some(a))]));
        assert!(r.witnesses.iter().any(|w| w.contains("no record of it")), "{:?}", r.witnesses);
        // a recorded twice.
        let r = judge(vec![put(a, None)], streamed(Some(a), vec![change(None, Some(a)), change(Some(a), Some(a))]));
        assert!(r.witnesses.iter().any(|w| w.contains("2 times")), "{:?}", r.witnesses);
        // c was shed, yet recorded.
        let shed = call(OpKind::Set, Some(c), Outcome::Fail, Observed::Nothing);
        let stream = vec![change(None, Some(a)), change(Some(a), Some(c)), change(Some(c), Some(a))];
        let r = judge(vec![put(a, None), shed], streamed(Some(a), stream));
        assert!(r.witnesses.iter().any(|w| w.contains("failed (not applied)")), "{:?}", r.witnesses);
        // No record at all.
        let r = judge(vec![put(a, None)], streamed(Some(a), vec![]));
        assert!(r.witnesses.iter().any(|w| w.contains("holds no record")), "{:?}", r.witnesses);
    }

    #[test]
    fn stream_records_of_no_call_or_extra_removals_are_violations() {
        let a = id(0, 0);
        let stranger = id(9, 9);
        let stream = vec![change(None, Some(stranger)), change(Some(stranger), Some(a))];
        let r = judge(vec![put(a, None)], streamed(Some(a), stream));
        assert!(r.witnesses.iter().any(|w| w.contains("not written to this key")), "{:?}", r.witnesses);
        let stream = vec![change(None, Some(a)), change(Some(a), None), change(None, Some(a))];
        let r = judge(vec![put(a, None)], streamed(Some(a), stream));
        assert!(r.witnesses.iter().any(|w| w.contains("removals")), "{:?}", r.witnesses);
    }

    #[test]
    fn on_a_key_an_earlier_cell_wrote_its_records_come_first_and_are_skipped() {
        let (a, b) = (id(0, 0), id(1, 0));
        let earlier = StreamChange { old: None, new: Some(b"an earlier cell's item".to_vec()) };
        let mut stream = vec![earlier.clone(), change(None, Some(a))];
        stream[1].old = earlier.new.clone();
        let calls = vec![call(OpKind::Set, Some(a), Outcome::Ok, Observed::Foreign), put(b, Some(a))];
        stream.push(change(Some(a), Some(b)));
        let writes: BTreeMap<u64, Vec<OpRecord>> = [(KEY, calls)].into_iter().collect();
        let items: HashMap<u64, StoredItem> = [(KEY, streamed(Some(b), stream))].into_iter().collect();
        let r = check(&writes, &items, SCOPE, false);
        assert_eq!(r.violations, 0, "{:?}", r.witnesses);
    }
}
