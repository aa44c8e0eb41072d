//! Prometheus text for `/metrics`, and the latency histograms behind it.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::Snapshot;

/// Upper bounds of the latency buckets, in microseconds.
const BUCKETS_US: [u64; 14] = [5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 50_000, 250_000, 1_000_000];

/// A fixed-bucket latency histogram with atomic counters (lock-free to record).
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS_US.len()],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Records one observation.
    pub fn record(&self, d: Duration) {
        let us = d.as_micros() as u64;
        if let Some(i) = BUCKETS_US.iter().position(|&b| us <= b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (i, b) in BUCKETS_US.iter().enumerate() {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{}\"}} {cumulative}", *b as f64 / 1e6);
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {count}");
        let _ = writeln!(
            out,
            "{name}_sum{{{}}} {}",
            labels.trim_end_matches(','),
            self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9
        );
        let _ = writeln!(out, "{name}_count{{{}}} {count}", labels.trim_end_matches(','));
    }
}

/// One socket command in this many is timed for `resp_latency`.
pub const SOCKET_LATENCY_SAMPLE: u32 = 16;

/// Whether to time this socket command (see [`SOCKET_LATENCY_SAMPLE`]).
pub fn sample_socket_latency() -> bool {
    thread_local! {
        static SEEN: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }
    SEEN.with(|n| {
        let next = n.get().wrapping_add(1);
        n.set(next);
        next % SOCKET_LATENCY_SAMPLE == 0
    })
}

/// Surface-level counters and histograms.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Decision latency on the Unix socket (command parsed to reply ready),
    /// of a sample: one command in [`SOCKET_LATENCY_SAMPLE`] per worker
    /// thread (a clock read costs as much as a cached decision).
    pub resp_latency: Histogram,
    /// Decision latency over HTTP.
    pub http_latency: Histogram,
    /// Socket connections accepted.
    pub connections: AtomicU64,
    /// Socket connections refused at the connection limit.
    pub connections_refused: AtomicU64,
    /// Socket commands served.
    pub commands: AtomicU64,
}

/// Renders every metric in Prometheus text format.
pub fn render(m: &Metrics, snap: &Snapshot) -> String {
    let mut o = String::with_capacity(4096);
    let (l, c) = (&snap.lease, &snap.store);
    let mut counter = |name: &str, help: &str, samples: &[(&str, u64)]| {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter");
        for (labels, v) in samples {
            let _ = writeln!(o, "{name}{labels} {v}");
        }
    };
    counter(
        "leasehold_decisions_total",
        "Decisions by outcome and where they were served.",
        &[
            ("{outcome=\"allowed\",served=\"local\"}", l.allowed_local),
            ("{outcome=\"allowed\",served=\"store\"}", l.allowed_store),
            ("{outcome=\"denied\",served=\"local\"}", l.denied_local),
            ("{outcome=\"denied\",served=\"store\"}", l.denied_store),
            ("{outcome=\"allowed\",served=\"degraded\"}", l.degraded),
            ("{outcome=\"denied\",served=\"unavailable\"}", l.unavailable),
        ],
    );
    counter(
        "leasehold_store_operations_total",
        "Store operations.",
        &[
            ("{op=\"read\"}", c.reads),
            ("{op=\"write\"}", c.writes),
            ("{op=\"conflict\"}", c.conflicts),
            ("{op=\"retry\"}", c.retries),
            ("{op=\"error\"}", c.errors),
        ],
    );
    counter(
        "leasehold_store_corrupt_records_total",
        "Records whose state could not be read (treated as fresh).",
        &[("", c.corrupt)],
    );
    counter("leasehold_leases_total", "Leases taken.", &[("", l.leases)]);
    counter(
        "leasehold_leases_ahead_total",
        "Leases taken ahead of need, and those installed with no store call.",
        &[("{event=\"taken\"}", l.leases_ahead), ("{event=\"switched\"}", l.leases_switched)],
    );
    counter(
        "leasehold_lease_units_total",
        "Units leased, refunded, lost.",
        &[
            ("{kind=\"leased\"}", l.units_leased),
            ("{kind=\"refunded\"}", l.units_refunded),
            ("{kind=\"lost\"}", l.units_lost),
        ],
    );
    counter(
        "leasehold_socket_connections_total",
        "Socket connections accepted and refused.",
        &[
            ("{result=\"accepted\"}", m.connections.load(Ordering::Relaxed)),
            ("{result=\"refused\"}", m.connections_refused.load(Ordering::Relaxed)),
        ],
    );
    counter("leasehold_socket_commands_total", "Socket commands served.", &[("", m.commands.load(Ordering::Relaxed))]);
    let breaker = snap.breaker;
    let _ = writeln!(o, "# HELP leasehold_lease_units_held Units held in leases, not yet spent.\n# TYPE leasehold_lease_units_held gauge\nleasehold_lease_units_held {}", l.units_held);
    let _ = writeln!(o, "# HELP leasehold_l1_keys Keys with a slot in the lease cache.\n# TYPE leasehold_l1_keys gauge\nleasehold_l1_keys {}", snap.l1_keys);
    let _ = writeln!(o, "# HELP leasehold_breaker_state Circuit breaker state (1 for the current one).\n# TYPE leasehold_breaker_state gauge");
    for s in ["closed", "open", "half_open"] {
        let _ = writeln!(o, "leasehold_breaker_state{{state=\"{s}\"}} {}", u8::from(breaker.name() == s));
    }
    let _ = writeln!(
        o,
        "# HELP leasehold_decision_seconds Decision latency by surface.\n# TYPE leasehold_decision_seconds histogram"
    );
    m.resp_latency.render(&mut o, "leasehold_decision_seconds", "surface=\"socket\",");
    m.http_latency.render(&mut o, "leasehold_decision_seconds", "surface=\"http\",");
    o
}
