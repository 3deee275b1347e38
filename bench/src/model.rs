//! The host model: what Kubewarden's evaluator charges a request, measured and modelled.
//! Operations are timed in turns ([`measure`]); a workload's cost is what the harness measured
//! plus a residual per host call and per byte, fitted once to kwctl's table ([`Modelled`]).

use std::time::{Duration, Instant};

/// Median, p99 and spread of one measured operation.
pub struct Stats {
    pub samples: Vec<Duration>,
}

impl Stats {
    pub fn quantile(&self, q: f64) -> Duration {
        let index = ((self.samples.len() - 1) as f64 * q).round() as usize;
        self.samples[index]
    }
    pub fn median(&self) -> Duration {
        self.quantile(0.5)
    }
    pub fn p99(&self) -> Duration {
        self.quantile(0.99)
    }
    /// Interquartile range relative to the median.
    pub fn spread(&self) -> f64 {
        (self.quantile(0.75).as_secs_f64() - self.quantile(0.25).as_secs_f64())
            / self.median().as_secs_f64()
    }
}

/// Warm up, then sample until `budget` is spent (between 20 and 5,000 samples of each). Each
/// operation times itself, so what it prepares untimed (a fresh instance) is left out. The
/// operations take turns, so a noisy neighbour slows all of them alike and the ratios between
/// them hold even when the absolute numbers move.
pub fn measure<const N: usize>(
    budget: Duration,
    mut runs: [&mut dyn FnMut() -> Duration; N],
) -> [Stats; N] {
    let warm = Instant::now();
    while warm.elapsed() < budget / 10 {
        runs.iter_mut().for_each(|run| {
            run();
        });
    }
    let mut samples: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::new());
    let start = Instant::now();
    while (start.elapsed() < budget || samples[0].len() < 20) && samples[0].len() < 5000 {
        for (run, samples) in runs.iter_mut().zip(samples.iter_mut()) {
            samples.push(run());
        }
    }
    samples.map(|mut samples| {
        samples.sort();
        Stats { samples }
    })
}

/// Times `work`.
pub fn timed(work: impl FnOnce()) -> Duration {
    let t = Instant::now();
    work();
    t.elapsed()
}

pub fn micros(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e6)
}

pub fn millis(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1e3)
}

/// What kwctl pays beyond the mechanism the harness runs, per request, per host call and per
/// byte the host serialises, fitted to `make bench-kwctl`'s medians (`KWCTL_MEASURED`,
/// docs/benchmarks.md#calibration) so that the model errs high on every workload kwctl
/// measured: kwctl instantiates a module per `validate` (its accept-all floor 81-127 µs against
/// the harness's 77-92), writes the request and the settings anew for each (16 KB of settings
/// cost it 285 µs over the zero-call request), and its host answers a small call dearer, a
/// large list cheaper.
pub const RESIDUAL_PER_REQUEST_US: f64 = 45.0;
pub const RESIDUAL_PER_PAYLOAD_BYTE_NS: f64 = 8.0;
pub const RESIDUAL_PER_CALL_US: f64 = 25.0;
pub const RESIDUAL_PER_BYTE_NS: f64 = 1.5;

/// The residual every request pays for its payload of `payload` bytes, the accept-all
/// floor's included.
pub fn per_request(payload: usize) -> Duration {
    Duration::from_secs_f64(
        RESIDUAL_PER_REQUEST_US * 1e-6 + payload as f64 * RESIDUAL_PER_PAYLOAD_BYTE_NS * 1e-9,
    )
}

/// One workload's cost in the model: what was measured plus the residual of its host calls.
pub struct Modelled {
    pub total: Duration,
    pub host: Duration,
    pub calls: usize,
    pub bytes: usize,
}

impl Modelled {
    pub fn new(
        measured: Duration,
        host_measured: Duration,
        calls: usize,
        bytes: usize,
        payload: usize,
    ) -> Self {
        let mut model = Modelled {
            total: measured,
            host: host_measured,
            calls,
            bytes,
        };
        let residual = model.residual();
        model.total += residual + per_request(payload);
        model.host += residual;
        model
    }
    pub fn guest(&self) -> Duration {
        self.total.saturating_sub(self.host)
    }
    pub fn residual(&self) -> Duration {
        Duration::from_secs_f64(
            (self.calls as f64 * RESIDUAL_PER_CALL_US * 1e3
                + self.bytes as f64 * RESIDUAL_PER_BYTE_NS)
                * 1e-9,
        )
    }
}
