//! The HTTP surface's baseline: what a bare axum handler costs for the same
//! request and answer, so `tests/bench/socket.sh` can show the limiter's
//! share of `POST /v1/check` beside it.

use axum::http::HeaderMap;
use axum::routing::post;
use axum::{Json, Router};

/// The request body, as `POST /v1/check` reads it (the baseline parses it too).
#[derive(serde::Deserialize)]
struct CheckBody {
    limit: String,
    key: String,
    #[serde(default = "one")]
    cost: u64,
}

fn one() -> u64 {
    1
}

/// A router with one route, `POST /v1/check`: parses the body as the real
/// one does and answers a fixed allowed decision with the same JSON fields
/// and rate-limit headers.
pub fn http_baseline() -> Router {
    Router::new().route(
        "/v1/check",
        post(|Json(body): Json<CheckBody>| async move {
            let mut headers = HeaderMap::new();
            headers.insert("x-ratelimit-limit", 1_000_000_000u64.into());
            headers.insert("x-ratelimit-remaining", 999_999_999u64.into());
            headers.insert("x-ratelimit-reset", 0u64.into());
            let answer = serde_json::json!({
                "allowed": body.cost <= 1_000_000_000 && !body.limit.is_empty() && !body.key.is_empty(),
                "limit": 1_000_000_000u64,
                "remaining": 999_999_999u64,
                "retryAfterMs": 0,
                "resetAfterMs": 0,
            });
            (headers, Json(answer))
        }),
    )
}
