//! Faults on a schedule: each is applied at its offset into the measured
//! window, confirmed (the container really is paused, the link really is
//! gone), recorded with its times, and healed — after `heal_after`, or at the
//! end of the cell, or on abort, by the ledger of what is still in force.
//!
//! The scheduler knows no action: it finds the fault's backend (the kind's
//! own faults through its driver, else the provider's registry: docker's in
//! faultline-docker, processes' in provider/process/faults.rs), applies it
//! there through the target's provider, and files the undo that came back
//! (faultline_kind::fault::Undo) in its ledger.

mod own;
#[cfg(test)]
mod tests;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::provider::RunningTarget;
use crate::spec::{FaultSpec, FaultType, ProviderKind, Spec};
use faultline_faultfs::Layer;
use faultline_kind::fault::{Applied, Healed, Undo};
use faultline_kind::registry::Kinds;
use faultline_model::faults::Caching;
use faultline_spec::fault::DiskUse;

use faultline_model::faults::FaultRecord;

/// The faults each provider applies itself, as validation sees them (the
/// CLI's catalog hands this to the spec loader).
pub fn provider_faults(provider: ProviderKind) -> Vec<&'static dyn FaultType> {
    match provider {
        ProviderKind::Process => faultline_kind::fault::declared(crate::provider::process::faults::FAULTS),
        ProviderKind::Docker => faultline_docker::fault::declared(),
        ProviderKind::External => Vec::new(),
    }
}

/// Whether an instance of `target` runs its data on the fault filesystem,
/// and how: `cells` are the spec (its matrix point's) and scenario of each
/// cell it serves. It does when a spec asks for it, or one of those
/// scenarios has a fault that acts on the disk (each of a scenario's
/// targets gets the scenario's faults in its own cells, whichever the
/// fault names). A scenario with its own instance (a matrix the target's
/// fields use) keeps the layer to itself: the others measure the bare
/// disk. Write-back unless one of those faults answers each write as it
/// is made; names kept for a strict power loss only where one may come.
pub fn fault_filesystem<'a>(target: &str, cells: impl IntoIterator<Item = (&'a Spec, &'a str)>) -> Option<Layer> {
    let (mut asked, mut on_disk, mut uses) = (false, false, DiskUse::default());
    for (spec, scenario) in cells {
        let Some(t) = spec.targets.get(target) else { continue };
        asked |= t.fault_filesystem;
        let registry = provider_faults(t.provider);
        let faults = spec.scenarios.iter().filter(|s| s.name == scenario).flat_map(|s| &s.faults);
        for f in faults {
            if let Some(action) = registry.iter().find(|r| r.name() == f.action && r.on_fault_filesystem()) {
                on_disk = true;
                uses = uses.and(action.disk_use(&f.fields));
            }
        }
    }
    let caching = if uses.each_write { Caching::WriteThrough } else { Caching::WriteBack };
    (asked || on_disk).then_some(Layer { caching, strict_names: uses.strict_names })
}

/// The registered type of the fault's action in the backend that applies
/// it (as [`apply`] chooses it).
fn backend_type(
    target: &RunningTarget,
    fault: &FaultSpec,
    spec: &Spec,
    kinds: &Kinds,
) -> Option<&'static dyn FaultType> {
    let own = spec.targets.get(&target.name).and_then(|t| kinds.find(&t.kind).ok()).map(|k| (k.faults)());
    let provider = provider_faults(target.provider);
    own.unwrap_or_default().into_iter().chain(provider).find(|t| t.name() == fault.action)
}

/// The backend that applies the fault: the kind's own (its driver), else
/// the provider's (containers: faultline_docker::fault; processes:
/// provider/process/faults.rs), as validation chose it.
async fn apply(target: &RunningTarget, fault: &FaultSpec, spec: &Spec, kinds: &Kinds) -> anyhow::Result<Applied> {
    let kind = spec.targets.get(&target.name).and_then(|t| kinds.find(&t.kind).ok());
    if kind.is_some_and(|k| (k.faults)().iter().any(|f| f.name() == fault.action)) {
        own::apply(target, fault, spec).await
    } else {
        target.provided().apply(&target.name, fault, spec).await
    }
}

/// Runs a cell's fault schedule from `window_start` until `stop_at` (or
/// cancellation), then heals every fault still in force.
pub async fn run_schedule(
    spec: &Spec,
    kinds: &Kinds,
    target: &RunningTarget,
    faults: &[FaultSpec],
    window_start: Instant,
    stop_at: Instant,
    cancel: CancellationToken,
) -> Vec<FaultRecord> {
    let since = |t: Instant| t.saturating_duration_since(window_start).as_secs_f64();
    let mut records: Vec<FaultRecord> = Vec::new();
    let mut in_force: Ledger = Vec::new();
    let mut pending: Vec<(usize, Instant)> =
        faults.iter().enumerate().map(|(i, f)| (i, window_start + f.at.0)).collect();
    pending.sort_by_key(|(_, at)| *at);
    let mut pending = pending.into_iter().peekable();
    loop {
        let next_apply = pending.peek().map(|(_, at)| *at).filter(|at| *at < stop_at);
        let next_heal = in_force.iter().filter_map(|(_, at, _)| *at).min();
        let Some(wake) = [next_apply, next_heal].into_iter().flatten().min() else {
            // Nothing left to do before the end: wait for it.
            tokio::select! {
                _ = tokio::time::sleep_until(stop_at) => {}
                _ = cancel.cancelled() => {}
            }
            break;
        };
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = cancel.cancelled() => break,
        }
        let now = Instant::now();
        heal_due(&mut in_force, &mut records, &since).await;
        // Faults due now.
        while let Some((i, at)) = pending.peek().copied() {
            if at > now {
                break;
            }
            pending.next();
            let fault = &faults[i];
            let mut record = FaultRecord::requested(&fault.name, &fault.action, &fault.target, since(Instant::now()));
            record.restart = backend_type(target, fault, spec, kinds).and_then(|t| t.restarts(&fault.fields));
            let applying = apply(target, fault, spec, kinds);
            match apply_healing_on_time(applying, &mut in_force, &mut records, &since).await {
                Ok(applied) => {
                    record.confirmed_s = Some(since(Instant::now()));
                    record.hit = applied.hit;
                    record.evidence = applied.evidence;
                    record.output = applied.output;
                    if let Some(undo) = applied.undo {
                        let heal_at = fault.heal_after.map(|d| Instant::now() + d.0);
                        in_force.push((records.len(), heal_at, undo));
                    }
                }
                Err(e) => record.error = Some(format!("{e:#}")),
            }
            records.push(record);
        }
    }
    // The end of the cell, or an abort: undo whatever is still in force.
    for (i, _, undo) in in_force.into_iter().rev() {
        settle(&mut records[i], undo.heal().await, since(Instant::now()));
    }
    records
}

/// The faults in force: each one's record, when to heal it (None: at the
/// end of the cell) and what undoes it.
type Ledger = Vec<(usize, Option<Instant>, Box<dyn Undo>)>;

/// Heals every fault in force whose time has come.
async fn heal_due(in_force: &mut Ledger, records: &mut [FaultRecord], since: &impl Fn(Instant) -> f64) {
    let now = Instant::now();
    let (due, keep): (Vec<_>, Vec<_>) =
        std::mem::take(in_force).into_iter().partition(|(_, at, _)| at.is_some_and(|a| a <= now));
    *in_force = keep;
    for (i, _, undo) in due {
        settle(&mut records[i], undo.heal().await, since(Instant::now()));
    }
}

/// Applies `fault` while still healing the faults in force on time. An
/// apply can wait for seconds: a fault on `kv.primary` asks every member
/// its role, and a member an earlier fault froze answers only once thawed.
/// Healing only after the apply would stretch that earlier fault past its
/// `heal_after` (and the apply would wait out its whole limit); healed on
/// time, the frozen member answers and the apply goes on.
async fn apply_healing_on_time(
    applying: impl std::future::Future<Output = anyhow::Result<Applied>>,
    in_force: &mut Ledger,
    records: &mut [FaultRecord],
    since: &impl Fn(Instant) -> f64,
) -> anyhow::Result<Applied> {
    tokio::pin!(applying);
    loop {
        let Some(next_heal) = in_force.iter().filter_map(|(_, at, _)| *at).min() else {
            return applying.await;
        };
        tokio::select! {
            applied = &mut applying => return applied,
            _ = tokio::time::sleep_until(next_heal) => heal_due(in_force, records, since).await,
        }
    }
}

fn settle(record: &mut FaultRecord, healed: anyhow::Result<Healed>, at: f64) {
    match healed {
        Ok(healed) => {
            record.healed_s = Some(at);
            record.heal_evidence = healed.evidence;
            record.restart = record.restart.or(healed.restart);
        }
        Err(e) => {
            let message = format!("healing failed: {e:#}");
            record.error = Some(match record.error.take() {
                Some(earlier) => format!("{earlier}; {message}"),
                None => message,
            });
        }
    }
}
