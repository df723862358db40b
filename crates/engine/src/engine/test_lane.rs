//! What the executors' unit tests share: one lane of an open loop set up
//! as a cell sets it up (its recorder, schedule, deadlines), and the
//! cell's stats from what the lane recorded, so each executor's books
//! are held to the same accounting: every op due is sent or unsent, and
//! every op sent ends once, ok or failed.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::books::{LaneEnd, Settings};
use super::schedule::Pacing;
use crate::metrics::{CellMetrics, LiveCounters, OpenLoad, Recorder, SharedTimelines};
use crate::spec::arrivals::Arrivals;
use faultline_kind::workload::{OpStream, Workload};
use faultline_model::ops::OpKind;
use faultline_model::stats::CellStats;

/// One lane of gets at `rate` over a window, with `in_flight` slots and a
/// 40 ms deadline (also the hang watchdog's).
pub struct OneLane {
    pub settings: Settings,
    pub recorder: Recorder,
    pub ops: OpStream,
    pub workload: Arc<Workload>,
    shared: Arc<SharedTimelines>,
    arrivals: Arc<Arrivals>,
    rate: f64,
    window: Duration,
}

impl OneLane {
    pub fn new(rate: f64, window_ms: u64, in_flight: u32) -> OneLane {
        let spec: crate::spec::WorkloadSpec = serde_yaml_ng::from_str("{ops: {get: 1}, keys: {count: 10}}").unwrap();
        let workload = Arc::new(Workload::new(&spec, 1, 1));
        let t0 = Instant::now() + Duration::from_millis(5);
        let window = Duration::from_millis(window_ms);
        let shared = Arc::new(SharedTimelines::new(Duration::from_millis(100)));
        let recorder = Recorder::new(
            [OpKind::Get].into_iter(),
            t0,
            Arc::new(LiveCounters::default()),
            shared.clone(),
            true,
            false,
            false,
        );
        let arrivals = Arc::new(Arrivals::constant(rate));
        let timing = crate::spec::plan::CellTiming {
            warmup: Duration::ZERO,
            duration: window,
            deadline: Duration::from_millis(40),
            hang_after: Duration::from_millis(40),
            over_deadline_after: Duration::from_millis(40),
            fault_scale: 1.0,
            stage_scale: 1.0,
            windows: 1,
        };
        let settings = Settings {
            in_flight,
            timing,
            cancel_at_deadline: true,
            measure_from: t0,
            stop_at: t0 + window,
            pacing: Some(Pacing { t0, arrivals: Arc::clone(&arrivals), first: 0, stride: 1 }),
            active: Vec::new(),
            rounds: None,
            published: None,
        };
        let ops = workload.stream(0, 1, in_flight, 1, None);
        OneLane { settings, recorder, ops, workload, shared, arrivals, rate, window }
    }

    /// Runs the lane (`run` takes its ops, settings and recorder) and
    /// summarizes what it recorded as its cell would.
    pub async fn run<F>(self, run: impl FnOnce(OpStream, Settings, Recorder) -> F) -> CellStats
    where
        F: std::future::Future<Output = LaneEnd>,
    {
        let OneLane { settings, recorder, ops, shared, arrivals, rate, window, .. } = self;
        let end = run(ops, settings, recorder).await;
        let mut cell = CellMetrics::new();
        cell.merge(end.recorder);
        cell.absorb_timelines(&shared);
        let open_spec: crate::spec::OpenSpec = serde_yaml_ng::from_str(&format!("{{rate: {rate}}}")).unwrap();
        let open = OpenLoad { spec: &open_spec, arrivals: &arrivals, window_start_s: 0.0 };
        cell.summarize(window, Some(&open), &[])
    }
}
