//! A Redis primary switched through its Sentinels: the `failover` fault.
//!
//! Uncoordinated, it is `SENTINEL FAILOVER` as an operator types it: a
//! replica is promoted, and the old primary goes on acknowledging writes
//! until the Sentinels make it a replica, seconds later; those writes never
//! reach the new primary and are lost (replication is asynchronous).
//!
//! Coordinated, it does what Redis's own `FAILOVER` command does (that
//! command cannot be used while Sentinels manage the group: they would turn
//! the promoted replica back into one): writes are paused on the primary
//! (`CLIENT PAUSE WRITE`), every replica is waited for until it has applied
//! all the primary wrote, then `SENTINEL FAILOVER`; the moment a replica says
//! it is primary, the old primary is made its replica and its clients are
//! disconnected (what the Sentinels do later on their own), and only then
//! are writes let through there, to be refused as `-READONLY`. Nothing the
//! old primary acknowledged can be missing from the new one.

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use tokio::time::Instant;

use faultline_kind::topology::{FailoverMember, FailoverPlan};

/// How long writes stay paused at most: they resume on their own if
/// faultline dies mid-switch.
const PAUSE_LIMIT: Duration = Duration::from_secs(15);
/// How long the replicas may take to catch up, and a replica to be promoted.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(5);
const PROMOTION_LIMIT: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(10);
/// The coordinated switch must be done this long before the pause lapses:
/// once writes flow again the old primary would acknowledge them.
const PAUSE_MARGIN: Duration = Duration::from_secs(1);

/// Applies the failover; confirmed only once a replica says it is primary.
pub async fn run(plan: &FailoverPlan) -> anyhow::Result<String> {
    if !plan.coordinated {
        let started = Instant::now();
        let said = sentinel_failover(plan).await?;
        let promoted = wait_for_promotion(plan, Instant::now() + PROMOTION_LIMIT, &said).await?;
        return Ok(format!("{said}; {} promoted after {} ms", promoted.name, started.elapsed().as_millis()));
    }
    let started = Instant::now();
    let mut primary = connect(&plan.primary).await?;
    redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(PAUSE_LIMIT.as_millis() as u64)
        .arg("WRITE")
        .query_async::<()>(&mut primary)
        .await
        .with_context(|| format!("CLIENT PAUSE WRITE on {}", plan.primary.name))?;
    let switched = switch(plan, &mut primary, started).await;
    // Writes resume whatever happened: after a failed switch the old primary
    // is still the primary.
    let unpaused = redis::cmd("CLIENT").arg("UNPAUSE").query_async::<()>(&mut primary).await;
    let evidence = switched?;
    unpaused.with_context(|| format!("CLIENT UNPAUSE on {}", plan.primary.name))?;
    Ok(format!("{evidence}; writes let through after {} ms", started.elapsed().as_millis()))
}

/// The coordinated switch, with the primary's writes paused.
async fn switch(plan: &FailoverPlan, primary: &mut MultiplexedConnection, started: Instant) -> anyhow::Result<String> {
    let old = &plan.primary.name;
    let info = info_replication(primary).await?;
    let offset: u64 = field(&info, "master_repl_offset")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("{old} gave no master_repl_offset"))?;
    anyhow::ensure!(!plan.replicas.is_empty(), "{old} has no replica to fail over to");
    // Every step fits in the pause, with a margin: a switch that cannot is
    // abandoned (writes resume on the old primary, which is still primary).
    let pause_ends = started + PAUSE_LIMIT - PAUSE_MARGIN;
    for r in &plan.replicas {
        let mut conn = connect(r).await?;
        let deadline = (Instant::now() + CATCH_UP_LIMIT).min(pause_ends);
        loop {
            let info = info_replication(&mut conn).await?;
            let applied: u64 = field(&info, "slave_repl_offset").and_then(|v| v.parse().ok()).unwrap_or(0);
            if applied >= offset {
                break;
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} did not catch up with {old} within {CATCH_UP_LIMIT:?} (offset {applied} of {offset})",
                    r.name
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }
    let caught_up_ms = started.elapsed().as_millis();
    let said = sentinel_failover(plan).await?;
    let promoted = wait_for_promotion(plan, (Instant::now() + PROMOTION_LIMIT).min(pause_ends), &said).await?;
    let promoted_ms = started.elapsed().as_millis();
    if Instant::now() >= pause_ends {
        bail!("{said}; {} promoted after {promoted_ms} ms, too close to the end of the write pause", promoted.name);
    }
    redis::cmd("REPLICAOF")
        .arg(&promoted.host)
        .arg(promoted.port)
        .query_async::<()>(primary)
        .await
        .with_context(|| format!("REPLICAOF {} {} on {old}", promoted.host, promoted.port))?;
    // Clients ask the Sentinels again; their writes held by the pause end
    // with the connection, never applied.
    let dropped: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query_async(primary)
        .await
        .with_context(|| format!("CLIENT KILL TYPE normal on {old}"))?;
    Ok(format!(
        "writes paused on {old} at replication offset {offset}; {} caught up after {caught_up_ms} ms; {said}; \
         {} promoted after {promoted_ms} ms; {old} made its replica, {dropped} client connections closed",
        plan.replicas.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", "),
        promoted.name,
    ))
}

/// Waits until one of the replicas says it is primary. The Sentinels close
/// every client of the replica they promote (`CLIENT KILL TYPE normal`): a
/// connection that breaks is opened again.
async fn wait_for_promotion<'a>(
    plan: &'a FailoverPlan,
    deadline: Instant,
    said: &str,
) -> anyhow::Result<&'a FailoverMember> {
    let mut asking: Vec<Option<MultiplexedConnection>> = plan.replicas.iter().map(|_| None).collect();
    loop {
        for (r, conn) in plan.replicas.iter().zip(asking.iter_mut()) {
            if conn.is_none() {
                *conn = connect(r).await.ok();
            }
            let Some(c) = conn else { continue };
            match info_replication(c).await {
                Ok(info) if field(&info, "role").as_deref() == Some("master") => return Ok(r),
                Ok(_) => {}
                Err(_) => *conn = None,
            }
        }
        if Instant::now() >= deadline {
            bail!("{said}, but no replica said it was primary in time");
        }
        tokio::time::sleep(POLL).await;
    }
}

/// `SENTINEL FAILOVER` on the first Sentinel that takes it.
async fn sentinel_failover(plan: &FailoverPlan) -> anyhow::Result<String> {
    let mut refusals = Vec::new();
    for s in &plan.discovery {
        let asked = async {
            let mut conn = connect(s).await?;
            redis::cmd("SENTINEL").arg("FAILOVER").arg(&plan.group).query_async::<()>(&mut conn).await?;
            anyhow::Ok(())
        };
        match asked.await {
            Ok(()) => return Ok(format!("SENTINEL FAILOVER {} taken by {}", plan.group, s.name)),
            Err(e) => refusals.push(format!("{}: {e:#}", s.name)),
        }
    }
    bail!("no Sentinel took SENTINEL FAILOVER {}: {}", plan.group, refusals.join("; "))
}

async fn connect(m: &FailoverMember) -> anyhow::Result<MultiplexedConnection> {
    let client = redis::Client::open(m.uri.as_str()).with_context(|| format!("invalid redis uri `{}`", m.uri))?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .with_context(|| format!("cannot connect to {}", m.name))
}

async fn info_replication(conn: &mut MultiplexedConnection) -> anyhow::Result<String> {
    Ok(redis::cmd("INFO").arg("replication").query_async(conn).await?)
}

fn field(info: &str, name: &str) -> Option<String> {
    info.lines().find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':').map(|v| v.trim().to_string()))
}
