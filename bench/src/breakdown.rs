//! Where a request without host calls spends its time, phase by phase, in the native build: the
//! walk of the payload (the request read in it), the settings, the request's checks, the rules
//! and the response. A wasm run cannot be split from outside; the native phases say in what
//! proportion the guest's time goes.

use std::time::{Duration, Instant};

use cozystack_capabilities_policy::admission::Envelope;
use cozystack_capabilities_policy::cluster::HostCluster;
use cozystack_capabilities_policy::host::Host;
use cozystack_capabilities_policy::{response, settings};

use crate::model::{measure, micros};

/// Each phase runs this many times per sample: one run is a microsecond or less.
const BATCH: u32 = 64;

/// A request without host calls makes none; any call is a broken workload.
struct NoCalls;

impl Host for NoCalls {
    fn kubernetes(&self, operation: &str, _: &[u8]) -> Result<Vec<u8>, String> {
        Err(format!("the zero-call workload made a {operation} call"))
    }
}

/// Median time of each phase, and of the whole evaluation with its response.
pub struct Phases {
    /// The payload walked, the request read in the same walk.
    pub read: Duration,
    pub settings: Duration,
    /// The request's checks and its conversion into the resolver's model.
    pub request: Duration,
    pub rules: Duration,
    pub response: Duration,
    pub whole: Duration,
}

fn batched(mut work: impl FnMut()) -> impl FnMut() -> Duration {
    move || {
        let t = Instant::now();
        for _ in 0..BATCH {
            work();
        }
        t.elapsed() / BATCH
    }
}

/// Times the phases of evaluating `payload`, a request the rules decide without host calls.
pub fn phases(payload: &[u8], budget: Duration) -> Result<Phases, String> {
    let envelope = Envelope::read(payload)?;
    let settings_text = envelope.settings.unwrap_or("null");
    let settings =
        settings::parse_for_request(settings_text.as_bytes()).map_err(|e| e.to_string())?;
    let request = envelope.request(&settings).map_err(|e| e.to_string())?;
    let host = NoCalls;
    let verdict = cozystack_resolver::evaluate(&request, &settings, &HostCluster::new(&host));
    let read_request = || Envelope::read(payload).map(|envelope| envelope.request(&settings));
    let [read_t, settings_t, request_t, rules_t, response_t, whole_t] = measure(
        budget,
        [
            &mut batched(|| drop(std::hint::black_box(Envelope::read(payload)))),
            &mut batched(|| {
                drop(std::hint::black_box(settings::parse_for_request(
                    settings_text.as_bytes(),
                )))
            }),
            &mut batched(|| drop(std::hint::black_box(read_request()))),
            &mut batched(|| {
                drop(std::hint::black_box(cozystack_resolver::evaluate(
                    &request,
                    &settings,
                    &HostCluster::new(&host),
                )))
            }),
            &mut batched(|| {
                drop(std::hint::black_box(serde_json::to_vec(&response(
                    verdict.clone(),
                ))))
            }),
            &mut batched(|| {
                let verdict = cozystack_capabilities_policy::evaluate(payload, &host);
                drop(std::hint::black_box(serde_json::to_vec(&response(verdict))));
            }),
        ],
    );
    Ok(Phases {
        read: read_t.median(),
        settings: settings_t.median(),
        // Measured with the walk, which the line above measures alone.
        request: request_t.median().saturating_sub(read_t.median()),
        rules: rules_t.median(),
        response: response_t.median(),
        whole: whole_t.median(),
    })
}

impl Phases {
    /// One line: each phase's µs and share of the whole.
    pub fn line(&self) -> String {
        let share = |d: Duration| 100.0 * d.as_secs_f64() / self.whole.as_secs_f64();
        let parts = [
            ("payload and request walked", self.read),
            ("settings", self.settings),
            ("request checked", self.request),
            ("rules", self.rules),
            ("response", self.response),
        ]
        .map(|(name, d)| format!("{name} {} µs ({:.0} %)", micros(d), share(d)));
        format!("{}; whole {} µs", parts.join(", "), micros(self.whole))
    }
}
