//! What the server says it served: `serverStatus`'s `opcounters`, the
//! operations the server counted since it started, whatever their outcome.
//! The agents' cross-check (engine/agent/served.rs) holds their claimed
//! successes against them. Only where every op reaches the server read
//! (read preference `primary`): reads spread over secondaries are counted
//! there, and holding them against the primary's count would blame honest
//! agents.
//!
//! One counter can stand for two op kinds (`set` and `incr` are both
//! updates): each kind is held against it on its own, a one-sided check.

use anyhow::Context;
use mongodb::bson::{doc, Document};
use mongodb::options::{ReadPreference, SelectionCriteria};
use mongodb::Client;

use faultline_model::ops::OpKind;

/// The opcounter each op kind is counted in (ops.rs sends them as these).
const COUNTERS: [(OpKind, &str); 5] = [
    (OpKind::Get, "query"),
    (OpKind::Set, "update"),
    (OpKind::Incr, "update"),
    (OpKind::Insert, "insert"),
    (OpKind::Del, "delete"),
];

/// The primary's counters.
pub async fn served(client: &Client) -> anyhow::Result<faultline_kind::Served> {
    let status = client
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .selection_criteria(SelectionCriteria::ReadPreference(ReadPreference::Primary))
        .await
        .map_err(|e| anyhow::anyhow!("serverStatus: {}", super::errors::explain(&e)))?;
    counted(&status)
}

fn counted(status: &Document) -> anyhow::Result<faultline_kind::Served> {
    let counters = status.get_document("opcounters").context("serverStatus has no opcounters")?;
    let count = |name: &str| -> anyhow::Result<u64> {
        let n = match counters.get(name) {
            Some(mongodb::bson::Bson::Int32(n)) => *n as i64,
            Some(mongodb::bson::Bson::Int64(n)) => *n,
            Some(mongodb::bson::Bson::Double(n)) => *n as i64,
            _ => anyhow::bail!("serverStatus's opcounters has no count `{name}`"),
        };
        Ok(n.max(0) as u64)
    };
    let calls = COUNTERS.iter().map(|&(kind, name)| Ok((kind, count(name)?))).collect::<anyhow::Result<_>>()?;
    // A restart (a new pid) or another primary (another host) counts anew.
    let host = status.get_str("host").context("serverStatus has no host")?;
    let pid = match status.get("pid") {
        Some(mongodb::bson::Bson::Int32(n)) => *n as i64,
        Some(mongodb::bson::Bson::Int64(n)) => *n,
        _ => anyhow::bail!("serverStatus has no pid"),
    };
    Ok(faultline_kind::Served { server_id: format!("{host} pid {pid}"), source: "serverStatus opcounters", calls })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_kinds_read_their_opcounter_and_the_server_is_named_by_host_and_pid() {
        let status = doc! {
            "host": "m1:27017", "pid": 4242i64,
            "opcounters": {"insert": 3i64, "query": 1200i64, "update": 40i32, "delete": 0i32, "getmore": 0i32, "command": 77i32},
        };
        let served = counted(&status).unwrap();
        assert_eq!(served.server_id, "m1:27017 pid 4242");
        assert_eq!(
            served.calls,
            [(OpKind::Get, 1200), (OpKind::Set, 40), (OpKind::Incr, 40), (OpKind::Insert, 3), (OpKind::Del, 0)]
        );
        let e = counted(&doc! {"host": "m1", "pid": 1i32}).unwrap_err();
        assert!(format!("{e:#}").contains("no opcounters"), "{e:#}");
    }
}
