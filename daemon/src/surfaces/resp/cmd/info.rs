//! `INFO`: the daemon's counters in Redis' `INFO` layout.

use std::sync::atomic::Ordering;

use crate::app::App;

/// The `INFO` text.
pub(super) fn info(app: &App) -> String {
    let l = app.leases.stats().snapshot();
    let c = app.leases.counters().cas().stats().snapshot();
    let m = &app.metrics;
    let mut lines = vec![
        "# Server".to_string(),
        format!("leasehold_version:{}", env!("CARGO_PKG_VERSION")),
        format!("uptime_in_seconds:{}", app.started.elapsed().as_secs()),
        format!("store:{}", app.leases.counters().cas().store().name()),
        format!("limits:{}", app.config.limits.keys().cloned().collect::<Vec<_>>().join(",")),
        String::new(),
        "# Stats".into(),
        format!("connections_received:{}", m.connections.load(Ordering::Relaxed)),
        format!("commands_processed:{}", m.commands.load(Ordering::Relaxed)),
        format!("allowed_local:{}", l.allowed_local),
        format!("allowed_store:{}", l.allowed_store),
        format!("denied_local:{}", l.denied_local),
        format!("denied_store:{}", l.denied_store),
        format!("degraded:{}", l.degraded),
        format!("unavailable:{}", l.unavailable),
        String::new(),
        "# Leases".into(),
        format!("leases:{}", l.leases),
        format!("leases_ahead:{}", l.leases_ahead),
        format!("leases_switched:{}", l.leases_switched),
        format!("units_leased:{}", l.units_leased),
        format!("units_held:{}", l.units_held),
        format!("units_refunded:{}", l.units_refunded),
        format!("units_lost:{}", l.units_lost),
        format!("l1_keys:{}", app.leases.keys_cached()),
        String::new(),
        "# Store".into(),
        format!("store_reads:{}", c.reads),
        format!("store_writes:{}", c.writes),
        format!("store_conflicts:{}", c.conflicts),
        format!("store_errors:{}", c.errors),
        format!("breaker:{}", app.leases.breaker_state().name()),
    ];
    lines.push(String::new());
    lines.join("\r\n")
}
