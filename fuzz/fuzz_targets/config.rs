//! The config parser: arbitrary text as the TOML file, optionally followed by
//! `LEASEHOLD_*` environment overrides.
//!
//! Input: UTF-8 text. Up to a line `%%` it is the file; the lines after it
//! are `NAME=value` overrides, fed through `Config::load` as the daemon does
//! (the file is written to a scratch path first). Without `%%` the text goes
//! through `text.parse::<toml::Table>()` and `Config::from_table`.
//!
//! Checks: parsing and validation never panic (an `Err` is fine) and the
//! error's message can be printed; a config that validates builds an `App`
//! (over a memory store) that answers a check and a status query on every
//! limit it defines without panicking.
#![no_main]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use leasehold::app::App;
use leasehold::config::Config;
use leasehold::lease::Check;
use leasehold::store::memory::MemoryStore;
use leasehold_core::SystemClock;
use libfuzzer_sys::fuzz_target;

/// A per-process scratch file for the `Config::load` path.
fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| std::env::temp_dir().join(format!("leasehold-fuzz-config-{}.toml", std::process::id())))
}

fn exercise(config: Config) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    rt.block_on(async move {
        let names: Vec<String> = config.limits.keys().cloned().collect();
        let app = App::with_store(config, Arc::new(MemoryStore::new()), Arc::new(SystemClock));
        for name in &names {
            for cost in [1, 0, u64::MAX] {
                let _ = app.leases.check(Check { limit: name, key: "fuzz", cost }).await;
            }
            let _ = app.leases.status(name, "fuzz").await;
        }
        let _ = app.snapshot();
    });
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let result = match text.split_once("\n%%\n") {
        None => match text.parse::<toml::Table>() {
            Ok(table) => Config::from_table(table),
            Err(_) => return,
        },
        Some((file, env)) => {
            let env: Vec<(String, String)> =
                env.lines().filter_map(|l| l.split_once('=')).map(|(k, v)| (k.to_string(), v.to_string())).collect();
            std::fs::write(scratch(), file).unwrap();
            Config::load(Some(scratch()), env)
        }
    };
    match result {
        Ok(config) => {
            let _ = format!("{config:?}");
            exercise(config);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
