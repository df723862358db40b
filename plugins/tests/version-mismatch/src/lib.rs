//! A well-behaved workload shape built against a copy of the WIT whose
//! package version is `faultline:plugin@1.0.0`: the host (0.2.0) must refuse
//! it and name both versions. `wit/faultline.wit` is made by build.sh from
//! plugins/wit/faultline.wit with only the version changed.

wit_bindgen::generate!({
    path: "wit",
    world: "faultline:plugin/workload@1.0.0",
});

use exports::faultline::plugin::shape::{Batch, Completed, Guest, Info, Setup};

struct Shape;

impl Guest for Shape {
    fn init(_config: String, _seed: u64, _setup: Setup) -> Result<Info, String> {
        Ok(Info { observe: false })
    }

    fn next_ops(_worker: u32, n: u32) -> Batch {
        let n = n as usize;
        Batch { kinds: vec![0; n], keys: (0..n as u64).collect(), value_sizes: vec![0; n], args: Vec::new() }
    }

    fn observe(_completed: Vec<Completed>) {}
}

export!(Shape);
