//! What the members say they served: each member's gRPC server counts
//! the calls it handled per method (`grpc_server_handled_total` on its
//! client port's `/metrics`, kept at etcd's default `--metrics basic`),
//! whatever their outcome. The agents' cross-check (engine/agent/served.rs)
//! holds their claimed successes against the sum over the members: a
//! member's call counts once, on the member the client sent it to.
//!
//! The counters restart with a member, so the members' ids and start times
//! name this run of the cluster: counters of two runs are not subtracted.

use std::time::Duration;

use anyhow::Context;
use faultline_model::ops::OpKind;

/// The most of a `/metrics` answer read (etcd 3.4's is about 150 KiB).
const MOST: u64 = 4 << 20;

/// The gRPC method of the KV service each op kind is sent as (ops.rs).
const METHODS: [(&str, OpKind); 4] =
    [("Range", OpKind::Get), ("Put", OpKind::Set), ("DeleteRange", OpKind::Del), ("Txn", OpKind::Insert)];

/// The calls every member of `members` handled, per op kind.
pub async fn served(members: &[String], limit: Duration) -> anyhow::Result<faultline_kind::Served> {
    let mut calls: Vec<(OpKind, u64)> = METHODS.iter().map(|&(_, k)| (k, 0)).collect();
    let mut ids = Vec::new();
    for member in members {
        let (text, whole) = super::config::http_get(member, "/metrics", MOST, limit)
            .await
            .with_context(|| format!("{member}: /metrics"))?;
        // A page cut short could lack counters, which would read as calls
        // the member never served.
        anyhow::ensure!(whole, "{member}: /metrics is larger than {} MiB", MOST >> 20);
        let counted = Counters::parse(&text).with_context(|| format!("{member}: /metrics"))?;
        for (sum, (_, n)) in calls.iter_mut().zip(&counted.calls) {
            sum.1 += n;
        }
        ids.push(format!("{}@{}", counted.server_id, counted.started));
    }
    Ok(faultline_kind::Served { server_id: ids.join(","), source: "grpc_server_handled_total", calls })
}

/// One member's counters.
#[derive(Debug, PartialEq)]
struct Counters {
    server_id: String,
    started: String,
    calls: Vec<(OpKind, u64)>,
}

impl Counters {
    fn parse(text: &str) -> anyhow::Result<Counters> {
        let mut calls: Vec<(OpKind, u64)> = METHODS.iter().map(|&(_, k)| (k, 0)).collect();
        let mut seen = [false; METHODS.len()];
        let (mut server_id, mut started) = (None, None);
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((series, value)) = line.rsplit_once(' ') else { continue };
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            match name {
                "etcd_server_id" => server_id = label(labels, "server_id").map(str::to_string),
                "process_start_time_seconds" => started = Some(value.to_string()),
                "grpc_server_handled_total" if label(labels, "grpc_service") == Some("etcdserverpb.KV") => {
                    let method = label(labels, "grpc_method").unwrap_or_default();
                    let Some(i) = METHODS.iter().position(|(m, _)| *m == method) else { continue };
                    let n: f64 = value.parse().with_context(|| format!("`{line}`: not a count"))?;
                    calls[i].1 += n as u64;
                    seen[i] = true;
                }
                _ => {}
            }
        }
        // A method etcd does not count is not one it never served: etcd
        // lists every method (at 0) from its start.
        if let Some(i) = seen.iter().position(|s| !s) {
            anyhow::bail!("no grpc_server_handled_total of etcdserverpb.KV {}", METHODS[i].0);
        }
        Ok(Counters {
            server_id: server_id.context("no etcd_server_id")?,
            started: started.context("no process_start_time_seconds")?,
            calls,
        })
    }
}

/// The value of label `name` in `a="x",b="y"` (etcd's label values hold
/// no quotes or commas).
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    labels.trim_end_matches('}').split(',').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == name).then(|| v.trim_matches('"'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As etcd 3.4.23 writes them (trimmed): every code of every method.
    const METRICS: &str = r#"# HELP etcd_server_id Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.
# TYPE etcd_server_id gauge
etcd_server_id{server_id="667880157b8812c8"} 1
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 1200
grpc_server_handled_total{grpc_code="Unavailable",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 3
grpc_server_handled_total{grpc_code="OK",grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary"} 4.5e+06
grpc_server_handled_total{grpc_code="OK",grpc_method="Txn",grpc_service="etcdserverpb.KV",grpc_type="unary"} 7
grpc_server_handled_total{grpc_code="OK",grpc_method="DeleteRange",grpc_service="etcdserverpb.KV",grpc_type="unary"} 0
grpc_server_handled_total{grpc_code="OK",grpc_method="Status",grpc_service="etcdserverpb.Maintenance",grpc_type="unary"} 99
grpc_server_handled_total{grpc_code="OK",grpc_method="Compact",grpc_service="etcdserverpb.KV",grpc_type="unary"} 5
process_start_time_seconds 1.79656419496e+09
"#;

    #[test]
    fn kv_calls_are_summed_over_codes_per_method() {
        let c = Counters::parse(METRICS).unwrap();
        assert_eq!((c.server_id.as_str(), c.started.as_str()), ("667880157b8812c8", "1.79656419496e+09"));
        assert_eq!(c.calls, [(OpKind::Get, 1203), (OpKind::Set, 4_500_000), (OpKind::Del, 0), (OpKind::Insert, 7)]);
    }

    #[test]
    fn a_page_without_the_members_identity_or_a_method_is_refused() {
        let anonymous: String =
            METRICS.lines().filter(|l| !l.starts_with("etcd_server_id")).map(|l| l.to_string() + "\n").collect();
        let e = Counters::parse(&anonymous).unwrap_err();
        assert!(format!("{e:#}").contains("no etcd_server_id"), "{e:#}");
        // Counters missing are never read as 0 calls served.
        let no_deletes: String =
            METRICS.lines().filter(|l| !l.contains("DeleteRange")).map(|l| l.to_string() + "\n").collect();
        let e = Counters::parse(&no_deletes).unwrap_err();
        assert!(format!("{e:#}").contains("etcdserverpb.KV DeleteRange"), "{e:#}");
    }
}
