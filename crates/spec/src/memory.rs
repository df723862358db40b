//! What a cell's load asks of faultline's own memory, reckoned from the spec
//! before anything runs: every client holds a latency histogram per op kind
//! and its client (buffers, a driver's pool), every op in flight holds its
//! request and value (and, for MongoDB and DynamoDB, a pooled connection),
//! and a zipfian key space its table. A spec whose load would not
//! fit is refused where it asks for it, rather than aborting mid-run on a
//! failed allocation with nothing written.

use super::model::{KeyDistribution, Load, ValueSizeSpec, WorkloadSpec};

/// What a target kind's client costs, measured as peak RSS over many
/// clients (x1) and many ops in flight (docs/spec.md#memory); each kind
/// states its own ([`crate::KindInfo::cost`]).
#[derive(Debug, Clone, Copy)]
pub struct KindCost {
    /// One client connection besides its histograms: the Redis lane's
    /// buffers and task; a MongoDB client with its pool and monitor; a
    /// DynamoDB SDK client.
    pub connection: u64,
    /// One op in flight besides its value: its request and place in the
    /// books; a MongoDB or DynamoDB op also holds a pooled connection of
    /// its own while it is out.
    pub slot: u64,
}

/// A zipfian key space's alias table: 12 bytes a key, for at most 2^20 keys.
const ZIPF_TABLE_BYTES_PER_KEY: u64 = 12;

/// The most keys a zipfian key space draws from an alias table; past it
/// the workload draws by rejection and holds no table.
pub const ZIPF_TABLE_MAX_KEYS: u64 = 1 << 20;

/// The memory one latency histogram takes (its counts): 1 µs to an hour at
/// 3 significant digits. The engine's histograms are made to match (a test
/// there holds it to this).
pub const HISTOGRAM_BYTES: u64 = 23_552 * 8;

/// The share of the machine's memory a cell's load may take: the rest is
/// for the server under test, the checkers and everything else.
const MACHINE_SHARE_DIVISOR: u64 = 2;

/// The estimate, in parts a message can name.
pub struct Need {
    pub connections: u64,
    pub per_connection: u64,
    pub slots: u64,
    pub per_slot: u64,
    pub key_space: u64,
}

impl Need {
    pub fn total(&self) -> u64 {
        self.connections
            .saturating_mul(self.per_connection)
            .saturating_add(self.slots.saturating_mul(self.per_slot))
            .saturating_add(self.key_space)
    }
}

/// What `load` (in `stages` stages, or 0) of `workload` against a target
/// whose kind costs `cost` needs.
pub fn need(load: Load<'_>, stages: u64, workload: &WorkloadSpec, cost: KindCost) -> Need {
    let (connections, in_flight) = match load {
        Load::Closed(s) => (u64::from(s.clients), u64::from(s.in_flight)),
        Load::Open(o) => (u64::from(o.connections), u64::from(o.in_flight)),
    };
    // One histogram per op kind (and per op kind in each stage), and one
    // for the schedule's lag in an open loop.
    let kinds = workload.ops.len().max(1) as u64;
    let histograms = kinds * (1 + stages) + u64::from(matches!(load, Load::Open(_)));
    let value = match &workload.value_size {
        ValueSizeSpec::Fixed(s) => s.0,
        ValueSizeSpec::Range { max, .. } => max.0,
    };
    let key_space = match workload.keys.distribution {
        KeyDistribution::Zipfian => workload.keys.count.min(ZIPF_TABLE_MAX_KEYS) * ZIPF_TABLE_BYTES_PER_KEY,
        _ => 0,
    };
    Need {
        connections,
        per_connection: histograms * HISTOGRAM_BYTES + cost.connection,
        slots: connections.saturating_mul(in_flight),
        per_slot: cost.slot.saturating_add(value),
        key_space,
    }
}

/// The most a cell's load may need on this machine, None when its memory
/// is not known (then nothing is refused).
pub fn budget() -> Option<u64> {
    machine_memory().map(|total| total / MACHINE_SHARE_DIVISOR)
}

/// MemTotal, from /proc/meminfo.
fn machine_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 =
        text.lines().find_map(|l| l.strip_prefix("MemTotal:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

/// Why `need` does not fit in `budget`, or None when it does.
pub fn refusal(need: &Need, budget: u64) -> Option<String> {
    if need.total() <= budget {
        return None;
    }
    let mut parts = vec![format!(
        "{} connection{} x {} (latency histograms and the client)",
        need.connections,
        if need.connections == 1 { "" } else { "s" },
        bytes_text(need.per_connection)
    )];
    parts.push(format!(
        "{} ops in flight x {} (each holds its request and value)",
        need.slots,
        bytes_text(need.per_slot)
    ));
    if need.key_space > 0 {
        parts.push(format!("{} for the zipfian key table", bytes_text(need.key_space)));
    }
    Some(format!(
        "would need about {} of faultline's memory ({}), more than the {} a cell's load may take here (half of this machine's {}): fewer clients or ops in flight, or smaller values",
        bytes_text(need.total()),
        parts.join(" + "),
        bytes_text(budget),
        bytes_text(budget * MACHINE_SHARE_DIVISOR)
    ))
}

/// `1.5 GiB`, `96.0 KiB`, `512 B`.
fn bytes_text(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ClosedShape;

    fn workload(yaml: &str) -> WorkloadSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    /// A kind whose client is a socket and buffers (as Redis's).
    const SOCKET: KindCost = KindCost { connection: 32 << 10, slot: 256 };
    /// A kind whose client is a pool of its own (as MongoDB's driver).
    const POOL: KindCost = KindCost { connection: 2 << 20, slot: 64 << 10 };

    #[test]
    fn a_load_is_refused_with_what_it_would_need() {
        let w = workload("{ops: {get: 1, set: 1}, value_size: 768B}");
        let huge = need(Load::Closed(ClosedShape { clients: 10_000, in_flight: 10_000 }), 0, &w, SOCKET);
        assert_eq!(huge.slots, 100_000_000);
        assert_eq!(huge.per_slot, 256 + 768);
        let message = refusal(&huge, 8 << 30).expect("100 million slots of 1 KiB do not fit in 8 GiB");
        assert!(
            message.contains("100000000 ops in flight x 1.0 KiB") && message.contains("10000 connections"),
            "{message}"
        );
        assert!(message.contains("half of this machine's 16.0 GiB"), "{message}");
        let small = need(Load::Closed(ClosedShape { clients: 3, in_flight: 32 }), 0, &w, SOCKET);
        assert_eq!(refusal(&small, 8 << 30), None);
        // A MongoDB client is a pool of its own: 5000 of them do not fit in 8 GiB.
        let clients = need(Load::Closed(ClosedShape { clients: 5000, in_flight: 1 }), 0, &w, POOL);
        assert!(refusal(&clients, 8 << 30).is_some());
        assert_eq!(bytes_text(512), "512 B");
    }
}
