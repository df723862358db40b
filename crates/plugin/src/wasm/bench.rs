//! `faultline plugin bench`: how long a shape plugin takes per op, through
//! the same path the load clients use (batches, the shared lock, the
//! checks), next to the built-in zipfian generator drawing the same mix.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;

use super::shape::{Feed, Setup, Shape, DEFAULT_DEADLINE};
use super::{Limits, PluginHost, World};
use faultline_kind::workload::{OpSource, Workload};
use faultline_spec::WorkloadSpec;

const WORKLOAD: &str = "ops: {get: 80, set: 15, incr: 3, del: 2}\nkeys: {count: 100000, distribution: zipfian, exponent: 0.99}\nvalue_size: {min: 32B, max: 512B}\n";

/// The two timings, as `faultline plugin bench` prints them.
pub fn run(file: &std::path::Path, ops: u64, config: &str) -> anyhow::Result<String> {
    let config: serde_json::Value = serde_json::from_str(config).context("--config is not JSON")?;
    let spec: WorkloadSpec = serde_yaml_ng::from_str(WORKLOAD).expect("the bench workload parses");
    let workload = Arc::new(Workload::new(&spec, 1, 0));

    let mut builtin = workload.stream(0, 1, 1, 0, None);
    let started = Instant::now();
    let mut keys = 0u64;
    for _ in 0..ops {
        keys = keys.wrapping_add(builtin.next_op().expect("the built-in shape never ends").key);
    }
    let builtin_ns = started.elapsed().as_nanos() as f64 / ops as f64;

    let host = PluginHost::new()?;
    let plugin = host.load(file, World::Workload)?;
    let setup = Setup::of(&workload, 1, false);
    let limits = Limits { deadline: DEFAULT_DEADLINE, memory: super::DEFAULT_MEMORY };
    let shape = Arc::new(Mutex::new(Shape::start(&host, &plugin, limits, &config, 1, setup)?));
    let mut feed = Feed::new(&shape, 0, 32);
    let started = Instant::now();
    let mut drawn = 0u64;
    while drawn < ops {
        match feed.next_op() {
            Some(op) => keys = keys.wrapping_add(op.key),
            None => break,
        }
        drawn += 1;
    }
    let plugin_ns = started.elapsed().as_nanos() as f64 / drawn.max(1) as f64;
    if let Some(e) = shape.lock().expect("shape lock").stopped() {
        anyhow::bail!("{e}");
    }
    anyhow::ensure!(drawn == ops, "{} gave only {drawn} of {ops} ops", plugin.label());
    // Keeps the draws from being optimized away.
    std::hint::black_box(keys);
    Ok(format!(
        "built-in zipfian: {builtin_ns:.1} ns/op over {ops} ops\n{}: {plugin_ns:.1} ns/op over {ops} ops ({:.2}x the built-in)\n",
        plugin.label(),
        plugin_ns / builtin_ns
    ))
}
