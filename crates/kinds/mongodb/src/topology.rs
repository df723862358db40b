//! MongoDB replica sets in containers: each member is a `mongod --replSet
//! rs0`; once all answer, member 0 initiates the set with every member's
//! address on the target's network (addresses the host reaches too, so the
//! driver's discovery works from outside), preferring member 0 as primary.
//! Roles come from each member's own `hello`.

use std::time::Duration;

use anyhow::Context;
use mongodb::bson::{doc, Document};
use mongodb::options::{ClientOptions, HostInfo};
use mongodb::Client;

use super::admin::describe;
use faultline_kind::topology::{FailoverMember, MemberPlan, TopologyKind};
use faultline_model::roles::Role;

/// The replica set's name.
pub const SET_NAME: &str = "rs0";

pub struct MongoTopology;

async fn direct_client(uri: &str) -> anyhow::Result<Client> {
    let mut options = ClientOptions::parse(uri).await.with_context(|| format!("invalid MongoDB URI `{uri}`"))?;
    options.direct_connection = Some(true);
    options.server_selection_timeout = Some(Duration::from_secs(1));
    options.connect_timeout = Some(Duration::from_secs(1));
    Client::with_options(options).context("cannot create a MongoDB client")
}

async fn hello(uri: &str) -> anyhow::Result<Document> {
    let client = direct_client(uri).await?;
    let hello = client
        .database("admin")
        .run_command(doc! {"hello": 1})
        .await
        .map_err(|e| anyhow::anyhow!("hello {uri}: {}", super::errors::explain(&e)));
    client.shutdown().immediate(true).await;
    hello
}

/// A member's role in its `hello`: a secondary counts as linked when it
/// names a primary it follows.
pub fn role_of(hello: &Document) -> Role {
    if hello.get_bool("isWritablePrimary").unwrap_or(false) {
        Role::Primary
    } else if hello.get_bool("secondary").unwrap_or(false) {
        Role::Replica { linked: hello.get_str("primary").is_ok() }
    } else {
        Role::Other(describe(hello))
    }
}

#[async_trait::async_trait]
impl TopologyKind for MongoTopology {
    fn container_port(&self) -> u16 {
        27017
    }

    fn member_args(&self, member: &MemberPlan) -> Vec<String> {
        let port = member.port;
        // Members find each other through the set's configuration, not their
        // arguments: every member starts alike.
        ["--port", &port.to_string(), "--bind_ip_all", "--replSet", SET_NAME].map(String::from).to_vec()
    }

    fn group_uri(&self, hosts: &[String]) -> Option<String> {
        Some(format!("mongodb://{}/?replicaSet={SET_NAME}", hosts.join(",")))
    }

    async fn initiate(&self, members: &[FailoverMember]) -> anyhow::Result<String> {
        let config_members: Vec<Document> = members
            .iter()
            .enumerate()
            .map(|(i, m)| doc! {"_id": i as i32, "host": format!("{}:{}", m.host, m.port), "priority": if i == 0 { 2 } else { 1 }})
            .collect();
        let config = doc! {"_id": SET_NAME, "members": config_members};
        let client = direct_client(&members[0].uri).await?;
        let done = client.database("admin").run_command(doc! {"replSetInitiate": config}).await;
        client.shutdown().immediate(true).await;
        match done {
            Ok(_) => Ok(format!("replSetInitiate {SET_NAME} with {} members", members.len())),
            // A set a restarted container already belongs to.
            Err(e) if e.to_string().contains("AlreadyInitialized") => Ok(format!("{SET_NAME} already initiated")),
            Err(e) => Err(e).context("replSetInitiate"),
        }
    }

    async fn role(&self, uri: &str) -> anyhow::Result<Role> {
        Ok(role_of(&hello(uri).await?))
    }

    /// The URI's one host as the driver names it (`ServerAddress`'s
    /// `host:port`, the port 27017 when the URI gives none), which is the
    /// address a direct connection's commands report.
    fn address(&self, uri: &str) -> Option<String> {
        match mongodb::options::ConnectionString::parse(uri).ok()?.host_info {
            HostInfo::HostIdentifiers(hosts) if hosts.len() == 1 => Some(hosts[0].to_string()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_roles_from_hello() {
        assert_eq!(role_of(&doc! {"isWritablePrimary": true, "setName": "rs0"}), Role::Primary);
        let following = doc! {"isWritablePrimary": false, "secondary": true, "primary": "10.0.0.2:27017"};
        assert_eq!(role_of(&following), Role::Replica { linked: true });
        let alone = doc! {"isWritablePrimary": false, "secondary": true};
        assert_eq!(role_of(&alone), Role::Replica { linked: false });
        let fresh = doc! {"isWritablePrimary": false, "secondary": false, "isreplicaset": true};
        assert_eq!(role_of(&fresh), Role::Other("neither primary nor secondary".into()));
    }

    #[test]
    fn a_uri_of_one_server_gives_the_address_the_driver_reports() {
        let one = MongoTopology.address("mongodb://127.0.0.1:41234/?directConnection=true");
        assert_eq!(one.as_deref(), Some("127.0.0.1:41234"));
        assert_eq!(MongoTopology.address("mongodb://u:p@db.local/").as_deref(), Some("db.local:27017"));
        assert_eq!(MongoTopology.address("mongodb://a:1,b:2/?replicaSet=rs0"), None);
    }
}
