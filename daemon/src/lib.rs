//! # leasehold
//!
//! The daemon: a lease cache (L1) in front of a shared counter store (L2),
//! served over a Unix socket (RESP) and HTTP. This crate is the library the
//! `leasehold` binary is a thin shell around.
//!
//! ## Layout
//!
//! Each folder is a layer; a layer uses only the layers below it.
//!
//! | module | what it is |
//! |---|---|
//! | [`surfaces`] | how requests arrive: [`surfaces::resp`] (Unix socket, one file per command), [`surfaces::http`] (axum API, auth, errors, the dashboard), [`surfaces::server`] (runs both, graceful stop) |
//! | [`app`] | the composition root: builds the layers from the config; the state every surface shares |
//! | [`observe`] | metrics and the dashboard's live events, fed a snapshot of the counters below |
//! | [`cli`] | command-line tools: the socket client and the benchmarks |
//! | [`config`] | the TOML file and `LEASEHOLD_*` overrides, validated into settings |
//! | [`lease`] | L1, the lease cache: fast path, renewals (and renewals ahead), lease endings, stats; rate-limit counters as a client of the store; [`lease::local`], the single-host table (the counter itself when this process is its store's only writer) |
//! | [`store`] | L2: records, backends, the generic compare-and-set loop with per-key combining, and the guard (breaker + timeout) |
//! | `leasehold-core` | pure algorithms, states and clocks (no I/O) |
//!
//! ## How a decision flows
//!
//! 1. A surface parses a request (`THROTTLE api user-42` or `POST /v1/check`)
//!    into a [`lease::Check`] and hands it to the [`lease::LeaseCache`].
//! 2. On one host (embedded or memory store) the cache decides against the
//!    [`lease::local::LocalCounters`] table: exact, in memory, the file
//!    written behind. Over a shared store it answers from the key's leased
//!    units (no store call), or takes a new lease: a [`lease::counter::Op`]
//!    sent through the [`store::Guard`] to [`lease::counter::Counters`],
//!    which runs it as one [`store::cas::Update`] inside the [`store::Cas`]
//!    loop.
//! 3. The CAS loop reads the key's [`store::Record`] (or, writing first,
//!    guesses it from the last one seen), applies the core transition, and
//!    writes it back conditionally on its version.
//! 4. The surface turns the [`lease::Verdict`] into a reply and offers it to
//!    [`observe`]'s sketch.
//!
//! ## Where this round's features live
//!
//! Reservations and multi-limit checks: an engine beside `lease/` over a
//! multi-record conditional write added to `store/`. Idempotency keys and
//! customers: engines beside `lease/`, each a record kind and an
//! [`store::cas::Update`] over the same CAS loop. Reload: `config/` builds new
//! settings, `app` swaps them.

pub mod app;
pub mod cli;
pub mod config;
pub mod lease;
pub mod observe;
pub mod store;
pub mod surfaces;
