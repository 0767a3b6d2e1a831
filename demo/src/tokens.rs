//! The LLM gateway's requests as canonical JSON lines (`gpuledger ingest tokens`), one hour at a
//! time. Traffic follows the day; at the busiest hours time to first token grows past the SLO
//! for a share of requests, so throughput there is not all effective output.

use serde_json::json;

use crate::chunks::Chunks;
use crate::events::timestamp;
use crate::noise::{draw, mix};
use crate::scenario::{HOUR, Scenario, Service, daily_load};

/// A share of requests that fail at the gateway.
const ERROR_RATE: f64 = 0.012;

/// Every request of the window, an hour per chunk.
pub struct TokenRequests {
    start: chrono::DateTime<chrono::Utc>,
    seed: u64,
    hours: i64,
    next_hour: i64,
    /// (service, its replicas).
    services: Vec<(Service, usize)>,
}

impl TokenRequests {
    pub fn new(scenario: &Scenario) -> Self {
        TokenRequests {
            start: scenario.spec.start_time(),
            seed: scenario.spec.seed,
            hours: scenario.window_seconds() / HOUR,
            next_hour: 0,
            services: scenario
                .services
                .iter()
                .enumerate()
                .map(|(i, s)| (s.clone(), scenario.replicas(i)))
                .filter(|(_, replicas)| *replicas > 0)
                .collect(),
        }
    }

    /// Requests of one service in one hour.
    pub fn requests_in_hour(&self, service: usize, hour: i64) -> u64 {
        let (s, replicas) = &self.services[service];
        let t = hour * HOUR + HOUR / 2;
        let jitter = draw(self.seed, service as u64, hour as u64, 0.9, 1.1);
        (s.peak_requests_per_replica_hour * *replicas as f64 * daily_load(t) * jitter).round()
            as u64
    }

    fn write_hour(&self, hour: i64, buf: &mut Vec<u8>) {
        for (index, (service, _)) in self.services.iter().enumerate() {
            for k in 0..self.requests_in_hour(index, hour) {
                let key = mix(self.seed ^ mix((index as u64) << 40 ^ (hour as u64) << 16 ^ k));
                let d = |c: u64, low: f64, high: f64| draw(key, c, 0, low, high);
                let offset = d(1, 0.0, HOUR as f64);
                let t = hour * HOUR + offset as i64;
                let load = daily_load(t);
                let size = d(2, 0.0, 1.0);
                let input = if service.embedding {
                    d(3, 16.0, 512.0)
                } else if size < 0.7 {
                    d(3, 120.0, 1_000.0)
                } else if size < 0.93 {
                    d(3, 1_024.0, 8_000.0)
                } else if size < 0.995 {
                    d(3, 8_192.0, 32_000.0)
                } else {
                    d(3, 32_768.0, 64_000.0)
                } as u64;
                let failed = d(4, 0.0, 1.0) < ERROR_RATE;
                let output = if service.embedding || failed {
                    0
                } else {
                    d(5, 40.0, 900.0) as u64
                };
                let cache_hit = !service.embedding && d(6, 0.0, 1.0) < 0.25;
                let ttft = service.ttft_base_ms
                    * d(7, 0.8, 1.4)
                    * (1.0 + 0.9 * load.powi(4))
                    * (1.0 + input as f64 / 40_000.0);
                let latency = ttft + output as f64 * service.ms_per_output_token * d(8, 0.9, 1.2);
                let priority = if d(9, 0.0, 1.0) < if service.embedding { 0.6 } else { 0.15 } {
                    "batch"
                } else {
                    "online"
                };
                let ms = |x: f64| (x * 10.0).round() / 10.0;
                let record = json!({
                    "ts": timestamp(self.start, t),
                    "request_id": format!("req-{:016x}{:08x}", mix(key), k),
                    "namespace": service.namespace,
                    "workload": service.name,
                    "team": service.labels.team,
                    "environment": service.labels.environment,
                    "cost_center": service.labels.cost_center,
                    "model": service.labels.model,
                    "provider": if service.embedding { "tei" } else { "vllm" },
                    "priority": priority,
                    "input_tokens": input,
                    "output_tokens": output,
                    "cached_tokens": if cache_hit { input * 3 / 5 } else { 0 },
                    "ttft_ms": ms(ttft),
                    "latency_ms": ms(latency),
                    "status": if failed { "error" } else { "success" },
                    "cache_hit": cache_hit,
                });
                serde_json::to_writer(&mut *buf, &record).expect("serialisable");
                buf.push(b'\n');
            }
        }
    }
}

impl Chunks for TokenRequests {
    fn next_chunk(&mut self, buf: &mut Vec<u8>) -> bool {
        if self.next_hour == self.hours {
            return false;
        }
        self.write_hour(self.next_hour, buf);
        self.next_hour += 1;
        true
    }
}
