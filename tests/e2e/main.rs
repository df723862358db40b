//! End-to-end tests: the real `faultline` binary against real redis-server
//! processes, containers and plugins. Tests run two at a time: each holds
//! `support::shared()`; one that needs the machine alone holds
//! `support::exclusive()` and is `#[ignore = "alone: …"]`, run after the
//! rest by scripts/test.sh (`-- --ignored`), and a long shipped campaign
//! holds `support::heavy()` (support.rs says which and why). Everything,
//! as one pass: `cargo test --release --test e2e -- --include-ignored`.

mod support;

mod agents;
mod bad_input;
mod bad_specs;
mod campaign;
mod capacity;
mod check_cli;
mod docker;
mod dynamodb;
mod etcd;
mod failures;
mod fanout;
mod faults;
mod host_drift;
mod interrupts;
mod judged_nothing;
mod leftovers;
mod mongodb;
mod plugins;
mod power_loss;
mod process_targets;
mod readiness;
mod redis_tls;
mod reports;
mod runs;
mod safety;
mod secrets;
mod sentinel;
mod stages;
mod verdict_truth;
