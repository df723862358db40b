//! `faultline history generate-kv`: partitioned key-value histories with a
//! known answer, in the EDN lines `faultline check --model kv` reads, so the
//! linearizability checker can be tested and timed on the shape that used to
//! stall it: many clients over many keys, one key whose sub-history is
//! intractable for the search, and violations placed on purpose elsewhere.
//!
//! The clean part comes from a simulated linearizable store: every operation
//! takes effect at a point strictly inside its call and return, in that
//! order, so each get sees exactly what the store held there.
//!
//! The hard key ("hard") has `hard` appends all concurrent with each other,
//! then a get that sees them in the reverse of the order they were invoked.
//! That is linearizable, but the search tries orders in invocation order and
//! every prefix leaves a different value, so the memo cache never prunes: it
//! reaches the one good order only after trying the other `hard`! ones.
//!
//! A violation is a completed get on the key that returns a value no one
//! ever wrote.

use std::collections::HashMap;
use std::fmt::Write as _;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The name of the intractable key.
pub const HARD_KEY: &str = "hard";
/// What a placed violation reads.
pub const NEVER_WRITTEN: &str = "never-written";

/// What to generate.
#[derive(Debug, Clone)]
pub struct Shape {
    pub clients: u64,
    /// Ordinary keys, named `k0`, `k1`, …
    pub keys: u64,
    /// Ordinary operations per client.
    pub ops_per_client: u64,
    /// Concurrent appends on the hard key; 0 for no hard key. Each needs a
    /// client of its own.
    pub hard: u64,
    /// Indices of the ordinary keys that get a violation.
    pub violations: Vec<u64>,
    pub seed: u64,
}

/// One operation with its times and (for a get) what it saw.
struct Op {
    client: u64,
    f: &'static str,
    key: String,
    /// Written value, or for a get the value seen.
    value: String,
    call: u64,
    lin: u64,
    ret: u64,
}

/// The history as EDN lines, one event per line.
pub fn generate(shape: &Shape) -> Result<String, String> {
    if shape.hard > shape.clients {
        return Err(format!("--hard {} needs as many clients, but there are {}", shape.hard, shape.clients));
    }
    if let Some(k) = shape.violations.iter().find(|&&k| k >= shape.keys) {
        return Err(format!("--violate {k}: there are only keys k0 to k{}", shape.keys.saturating_sub(1)));
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(shape.seed);
    let mut ops = Vec::new();

    // The hard key: every append is invoked at 0 and returns at 10, then one
    // get (by client 0) sees them in reverse invocation order.
    if shape.hard > 0 {
        let seen: String = (0..shape.hard).rev().map(|i| format!("h{i}.")).collect();
        for i in 0..shape.hard {
            ops.push(Op {
                client: i,
                f: "append",
                key: HARD_KEY.into(),
                value: format!("h{i}."),
                call: 0,
                lin: 5,
                ret: 10,
            });
        }
        ops.push(Op { client: 0, f: "get", key: HARD_KEY.into(), value: seen, call: 11, lin: 12, ret: 13 });
    }

    // Ordinary keys: each client runs its operations one after another.
    let first = ops.len();
    for client in 0..shape.clients {
        let mut t = 20 + client;
        for j in 0..shape.ops_per_client {
            let call = t + rng.random_range(1..=3);
            let took = rng.random_range(2..=12);
            let lin = call + rng.random_range(1..took);
            let f = match rng.random_range(0..4) {
                0 | 1 => "get",
                2 => "put",
                _ => "append",
            };
            let key = format!("k{}", rng.random_range(0..shape.keys.max(1)));
            let value = if f == "get" { String::new() } else { format!("c{client}.{j};") };
            ops.push(Op { client, f, key, value, call, lin, ret: call + took });
            t = call + took;
        }
    }
    // Play the ordinary operations in the order they take effect.
    let mut order: Vec<usize> = (first..ops.len()).collect();
    order.sort_by_key(|&i| (ops[i].lin, ops[i].client));
    let mut store: HashMap<String, String> = HashMap::new();
    for i in order {
        let op = &mut ops[i];
        let held = store.entry(op.key.clone()).or_default();
        match op.f {
            "get" => op.value = held.clone(),
            "put" => *held = op.value.clone(),
            _ => held.push_str(&op.value),
        }
    }
    // Violations: the middle get of the key reads what no one wrote; a key
    // with no get gets one after everything else.
    let end = ops.iter().map(|o| o.ret).max().unwrap_or(0);
    for &k in &shape.violations {
        let key = format!("k{k}");
        let gets: Vec<usize> = (first..ops.len()).filter(|&i| ops[i].f == "get" && ops[i].key == key).collect();
        match gets.get(gets.len() / 2) {
            Some(&i) => ops[i].value = NEVER_WRITTEN.into(),
            None => ops.push(Op {
                client: 0,
                f: "get",
                key,
                value: NEVER_WRITTEN.into(),
                call: end + 1,
                lin: end + 2,
                ret: end + 3,
            }),
        }
    }

    // Events in time order; at one instant, calls before returns (that only
    // adds concurrency, which a linearizable history stays under).
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * ops.len());
    for (i, op) in ops.iter().enumerate() {
        events.push((op.call, false, i));
        events.push((op.ret, true, i));
    }
    events.sort();
    let mut text = String::new();
    for (_, ret, i) in events {
        let op = &ops[i];
        let (kind, value) = match (ret, op.f) {
            (false, "get") => (":invoke", "nil".to_string()),
            (false, _) => (":invoke", format!("{:?}", op.value)),
            (true, _) => (":ok", format!("{:?}", op.value)),
        };
        writeln!(text, "{{:process {}, :type {kind}, :f :{}, :key {:?}, :value {value}}}", op.client, op.f, op.key)
            .expect("writing to a String cannot fail");
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::jepsen_edn::parse;
    use crate::checker::linearizability::{check, Input, Model, Output, Verdict};
    use std::time::Duration;

    fn shape() -> Shape {
        Shape { clients: 10, keys: 5, ops_per_client: 30, hard: 0, violations: vec![], seed: 7 }
    }

    #[test]
    fn clean_history_is_linearizable_and_complete() {
        let text = generate(&shape()).unwrap();
        let ops = parse(&text, Model::Kv).unwrap();
        assert_eq!(ops.len(), 300);
        assert!(ops.iter().all(|o| o.ret.is_some()));
        assert_eq!(check(Model::Kv, &ops, Duration::from_secs(10)), Verdict::Linearizable);
    }

    #[test]
    fn placed_violation_is_on_its_key() {
        let text = generate(&Shape { violations: vec![3], ..shape() }).unwrap();
        let ops = parse(&text, Model::Kv).unwrap();
        let bad: Vec<_> = ops.iter().filter(|o| o.output == Output::Str(NEVER_WRITTEN.into())).collect();
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].input, Input::Get("k3".into()));
        let Verdict::NotLinearizable(w) = check(Model::Kv, &ops, Duration::from_secs(10)) else {
            panic!("a read of a value no one wrote must be a violation");
        };
        assert_eq!(w.partition.as_deref(), Some("k3"));
    }

    #[test]
    fn hard_key_is_linearizable_when_small() {
        // Five appends: 120 orders, the right one last, still quick.
        let text = generate(&Shape { hard: 5, ..shape() }).unwrap();
        let ops = parse(&text, Model::Kv).unwrap();
        assert_eq!(check(Model::Kv, &ops, Duration::from_secs(10)), Verdict::Linearizable);
        // Seen in any other order than reversed, it would not be.
        assert!(text.contains(r#":value "h4.h3.h2.h1.h0."}"#), "{text}");
    }

    #[test]
    fn impossible_shapes_are_refused() {
        assert!(generate(&Shape { hard: 11, ..shape() }).is_err());
        assert!(generate(&Shape { violations: vec![5], ..shape() }).is_err());
    }
}
