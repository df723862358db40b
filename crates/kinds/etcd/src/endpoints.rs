//! Where an etcd target is: `etcd://HOST:PORT[,HOST:PORT…]`, the client
//! addresses of one or more members (plain HTTP/2: no TLS yet), and the
//! clients faultline opens to them. Each client is of one member (tonic's
//! balancer would pick among the URI's members per request, and then no one
//! could say which member answered a read, which is the whole question
//! when one of them is cut off from the others).

use std::time::Duration;

use anyhow::Context;
use etcd_client::{Client, ConnectOptions};

use super::EtcdOptions;

/// The URI scheme of etcd targets.
pub const SCHEME: &str = "etcd://";

/// The members' `host:port`s in `uri`, or what is wrong with it.
pub fn parse(uri: &str) -> Result<Vec<String>, String> {
    let rest = uri.strip_prefix(SCHEME).ok_or_else(|| {
        "is not an etcd URI: write etcd://HOST:PORT[,HOST:PORT…] (the members' client addresses)".to_string()
    })?;
    let rest = rest.trim_end_matches('/');
    let mut members = Vec::new();
    for member in rest.split(',') {
        let (host, port) = member
            .rsplit_once(':')
            .ok_or_else(|| format!("`{member}` has no port: write HOST:PORT, e.g. 127.0.0.1:2379"))?;
        if host.is_empty() || host.contains('/') || host.contains('@') {
            return Err(format!("`{member}` is not HOST:PORT (credentials and paths are not supported)"));
        }
        port.parse::<u16>().map_err(|_| format!("`{member}`: `{port}` is not a port number"))?;
        members.push(member.to_string());
    }
    Ok(members)
}

/// The URI of the one member at `host_port`.
pub fn member_uri(host_port: &str) -> String {
    format!("{SCHEME}{host_port}")
}

/// A client of the one member at `host_port`. The connection is opened
/// lazily by the first call, which then fails within the connect timeout
/// when the member is not there.
pub async fn client(host_port: &str, options: &EtcdOptions) -> anyhow::Result<Client> {
    let connect = ConnectOptions::new()
        .with_connect_timeout(options.connect_timeout())
        // A member cut off mid-call (paused, partitioned) holds the
        // connection open: keep-alive pings find it dead, as clientv3's
        // dial keep-alive does, so the next call dials again.
        .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
        .with_require_leader(options.require_leader);
    Client::connect([format!("http://{host_port}")], Some(connect))
        .await
        .with_context(|| format!("cannot make an etcd client for {host_port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_members_by_host_and_port() {
        assert_eq!(parse("etcd://127.0.0.1:2379"), Ok(vec!["127.0.0.1:2379".to_string()]));
        assert_eq!(parse("etcd://a:1,b:2/").unwrap(), ["a:1", "b:2"]);
        assert!(parse("http://a:1").unwrap_err().contains("etcd://HOST:PORT"));
        assert!(parse("etcd://a").unwrap_err().contains("has no port"));
        assert!(parse("etcd://a:x").unwrap_err().contains("not a port number"));
        assert!(parse("etcd://u:p@a:1").unwrap_err().contains("not HOST:PORT"));
    }
}
