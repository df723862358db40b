//! `faultline agents render --kubernetes`: the manifests that run a run's
//! agents on Kubernetes, for GitOps or `kubectl apply`: an Indexed Job of N
//! pods (one per agent, never restarted: an agent lost mid-cell fails its
//! cell, and a new one could not join a run already under way), each
//! running `faultline agent --connect` to the coordinator, which waits for
//! them with `--agents wait:N`. The pods spread over nodes where they can,
//! since an agent exists to bring another machine's CPU.

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
}

/// The Job, as YAML.
pub fn render(args: &RenderArgs) -> Result<String, String> {
    if !(1..=256).contains(&args.count) {
        return Err(format!("--count {}: between 1 and 256 agents", args.count));
    }
    if !args.connect.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok()) {
        return Err(format!("--connect {}: give the coordinator's HOST:PORT as the pods reach it", args.connect));
    }
    let labels = json!({"app.kubernetes.io/name": "faultline-agent", "app.kubernetes.io/instance": args.job});
    let mut container = json!({
        "name": "agent",
        "image": args.image,
        "command": ["faultline"],
        "args": ["agent", "--connect", args.connect],
        // The pod's name (job-index-suffix) names the agent in results.
        "env": [{"name": "FAULTLINE_AGENT_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
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
                    "containers": [container],
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
        "# {} faultline agents dialing {}; start the run first:\n#   faultline run SPEC --agents wait:{} --agent-listen 0.0.0.0:{}\n",
        args.count,
        args.connect,
        args.count,
        args.connect.rsplit_once(':').map_or("PORT", |(_, p)| p)
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
        assert!(render(&args()).unwrap().starts_with("# 4 faultline agents dialing 10.0.0.5:7600"));
    }

    #[test]
    fn bad_arguments_say_what_to_give() {
        assert!(render(&RenderArgs { connect: "nowhere".into(), ..args() }).unwrap_err().contains("HOST:PORT"));
        assert!(render(&RenderArgs { count: 0, ..args() }).unwrap_err().contains("between 1 and 256"));
    }
}
