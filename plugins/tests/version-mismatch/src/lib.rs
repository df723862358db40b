//! A well-behaved workload shape built against a copy of the WIT whose
//! package version is `faultline:plugin@1.0.0`: the host (0.1.0) must refuse
//! it and name both versions. `wit/faultline.wit` is made by build.sh from
//! plugins/wit/faultline.wit with only the version changed.

wit_bindgen::generate!({
    path: "wit",
    world: "faultline:plugin/workload@1.0.0",
});

use exports::faultline::plugin::shape::{Completed, Guest, Info, Op, Setup};

struct Shape;

impl Guest for Shape {
    fn init(_config: String, _seed: u64, _setup: Setup) -> Result<Info, String> {
        Ok(Info { observe: false })
    }

    fn next_ops(_worker: u32, n: u32) -> Vec<Op> {
        (0..n as u64).map(|key| Op { kind: 0, key, value_size: 0, args: Vec::new() }).collect()
    }

    fn observe(_completed: Vec<Completed>) {}
}

export!(Shape);
