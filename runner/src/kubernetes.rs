//! `faultline agents render --kubernetes`: the manifests that run a run's
//! agents on Kubernetes, for GitOps or `kubectl apply`: an Indexed Job of N
//! pods (one per agent, never restarted: an agent lost mid-cell fails its
//! cell, and a new one could not join a run already under way), each
//! running `faultline agent --connect` to the coordinator, which waits for
//! them with `--agents wait:N`. The pods spread over nodes where they can,
//! since an agent exists to bring another machine's CPU. Each pod mounts
//! the run's agent key from a Secret (read-only, owner-only) and is told
//! where it is by FAULTLINE_AGENT_KEY_FILE: the key never appears in the
//! manifest, the pod's command line or its environment.

use serde_json::json;

pub struct RenderArgs {
    pub count: u32,
    /// The coordinator's address as the pods reach it.
    pub connect: String,
    pub image: String,
    pub namespace: String,
    pub job: String,
    /// CPU each agent asks for (and is limited to), in cores.
    pub cpu: Option<f64>,
    /// The Secret holding the agent key, under the key `key`.
    pub key_secret: String,
}

/// Where a pod finds the agent key.
const KEY_DIR: &str = "/var/run/secrets/faultline";

/// The Job, as YAML.
pub fn render(args: &RenderArgs) -> Result<String, String> {
    if !(1..=256).contains(&args.count) {
        return Err(format!("--count {}: between 1 and 256 agents", args.count));
    }
    if !args.connect.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok()) {
        return Err(format!("--connect {}: give the coordinator's HOST:PORT as the pods reach it", args.connect));
    }
    let dns_name = |n: &str| {
        (1..=253).contains(&n.len())
            && n.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && n.starts_with(|c: char| c.is_ascii_alphanumeric())
            && n.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    if !dns_name(&args.key_secret) {
        return Err(format!(
            "--key-secret {}: a Secret's name is lower-case letters, digits, '-' and '.' (at most 253)",
            args.key_secret
        ));
    }
    let labels = json!({"app.kubernetes.io/name": "faultline-agent", "app.kubernetes.io/instance": args.job});
    let mut container = json!({
        "name": "agent",
        "image": args.image,
        "command": ["faultline"],
        "args": ["agent", "--connect", args.connect],
        "env": [
            // The pod's name (job-index-suffix) names the agent in results.
            {"name": "FAULTLINE_AGENT_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "FAULTLINE_AGENT_KEY_FILE", "value": format!("{KEY_DIR}/key")},
        ],
        "volumeMounts": [{"name": "agent-key", "mountPath": KEY_DIR, "readOnly": true}],
    });
    if let Some(cpu) = args.cpu {
        let cores = format!("{}m", (cpu * 1000.0).round() as u64);
        container["resources"] = json!({"requests": {"cpu": cores}, "limits": {"cpu": cores}});
    }
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": args.job, "namespace": args.namespace, "labels": labels},
        "spec": {
            "completionMode": "Indexed",
            "completions": args.count,
            "parallelism": args.count,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    // An agent talks to the coordinator and the targets, never to the API server.
                    "automountServiceAccountToken": false,
                    "containers": [container],
                    "volumes": [{
                        "name": "agent-key",
                        "secret": {"secretName": args.key_secret, "defaultMode": 0o400, "items": [{"key": "key", "path": "key"}]},
                    }],
                    "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {"matchLabels": {"app.kubernetes.io/instance": args.job}},
                        },
                    }]}},
                },
            },
        },
    });
    let header = format!(
        "# {count} faultline agents dialing {connect}. First the run's key, as a Secret:\n\
         #   faultline agents key > agent.key && chmod 600 agent.key\n\
         #   kubectl -n {namespace} create secret generic {secret} --from-file=key=agent.key\n\
         # then the run, then these manifests:\n\
         #   faultline run SPEC --agents wait:{count} --agent-listen 0.0.0.0:{port} --agent-key-file agent.key\n",
        count = args.count,
        connect = args.connect,
        namespace = args.namespace,
        secret = args.key_secret,
        port = args.connect.rsplit_once(':').map_or("PORT", |(_, p)| p)
    );
    serde_yaml_ng::to_string(&job).map(|yaml| header + &yaml).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(args: &RenderArgs) -> serde_json::Value {
        serde_yaml_ng::from_str(&render(args).unwrap()).unwrap()
    }

    fn args() -> RenderArgs {
        RenderArgs {
            count: 4,
            connect: "10.0.0.5:7600".into(),
            image: "registry.example/faultline:0.1.0".into(),
            namespace: "load".into(),
            job: "faultline-agents".into(),
            cpu: Some(1.5),
            key_secret: "faultline-agent-key".into(),
        }
    }

    #[test]
    fn an_indexed_job_of_one_pod_per_agent_dialing_the_coordinator() {
        let job = parsed(&args());
        assert_eq!(job["kind"], "Job");
        assert_eq!(job["spec"]["completionMode"], "Indexed");
        assert_eq!((job["spec"]["completions"].as_u64(), job["spec"]["parallelism"].as_u64()), (Some(4), Some(4)));
        assert_eq!(job["spec"]["backoffLimit"], 0);
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(pod["restartPolicy"], "Never");
        let c = &pod["containers"][0];
        assert_eq!(c["args"], json!(["agent", "--connect", "10.0.0.5:7600"]));
        assert_eq!(c["resources"]["limits"]["cpu"], "1500m");
        // The key: a Secret mounted owner-only, named by a path, never a value.
        assert_eq!(pod["volumes"][0]["secret"]["secretName"], "faultline-agent-key");
        assert_eq!(pod["volumes"][0]["secret"]["defaultMode"], 0o400);
        assert_eq!(c["volumeMounts"][0]["mountPath"], KEY_DIR);
        assert!(c["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "FAULTLINE_AGENT_KEY_FILE" && e["value"] == format!("{KEY_DIR}/key")));
        assert_eq!(pod["automountServiceAccountToken"], false);
        let text = render(&args()).unwrap();
        assert!(text.starts_with("# 4 faultline agents dialing 10.0.0.5:7600"), "{text}");
        assert!(text.contains("create secret generic faultline-agent-key --from-file=key=agent.key"), "{text}");
    }

    #[test]
    fn bad_arguments_say_what_to_give() {
        assert!(render(&RenderArgs { connect: "nowhere".into(), ..args() }).unwrap_err().contains("HOST:PORT"));
        assert!(render(&RenderArgs { count: 0, ..args() }).unwrap_err().contains("between 1 and 256"));
        let bad = RenderArgs { key_secret: "Agent_Key".into(), ..args() };
        assert!(render(&bad).unwrap_err().contains("--key-secret Agent_Key"));
    }
}
