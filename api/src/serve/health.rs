//! `/healthz` (the process answers), `/readyz` (it can reach its catalog and is not shutting
//! down) and `/metrics`. None of them needs a token: probes and Prometheus carry none.

use std::sync::atomic::Ordering;

use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;

use super::AppState;

pub async fn healthz() -> &'static str {
    "ok\n"
}

pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    if state.shutting_down.load(Ordering::SeqCst) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting down\n".to_string(),
        );
    }
    match state.lake.catalog().ping().await {
        Ok(_) => (StatusCode::OK, "ready\n".to_string()),
        Err(error) => {
            tracing::warn!(%error, "not ready: catalog unreachable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "catalog unreachable\n".to_string(),
            )
        }
    }
}

pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    state
        .metrics
        .observe_workers(&gpuledger_query::distributed::Workers::of_this_process())
        .await;
    if let Some(decoded) = &state.decoded_files {
        state.metrics.decoded_bytes.set(decoded.held() as i64);
        state.metrics.decoded_files.set(decoded.files() as i64);
    }
    (
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
}
