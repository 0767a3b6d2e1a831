//! The dashboard: the files of `web/` (plain ES modules and CSS, no build step), embedded in the
//! binary at compile time so that `serve` needs nothing beside it and works offline.
//!
//! Every file is answered with its content type and an ETag (its SHA-256), and must be
//! revalidated before reuse (`no-cache`): the file names carry no version, so a browser must never
//! keep an old module after an upgrade, and a revalidation costs a 304 without a body.

use axum::body::Body;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH, X_CONTENT_TYPE_OPTIONS,
};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

#[derive(RustEmbed)]
#[folder = "../web/"]
#[exclude = "README.md"]
struct Assets;

/// What the browser may load: this origin's files only, no inline script.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; \
     script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// `GET /` and every path no other route takes: the file of `web/` at that path, or 404.
pub async fn asset(uri: Uri, headers: HeaderMap) -> Response {
    let path = match uri.path().trim_start_matches('/') {
        "" => "index.html",
        path => path,
    };
    let Some(file) = Assets::get(path) else {
        return (StatusCode::NOT_FOUND, "not found\n").into_response();
    };
    let etag = format!("\"{}\"", hex::encode(file.metadata.sha256_hash()));
    let cached = headers
        .get(IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag));
    let mut response = if cached {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = Response::new(Body::from(file.data.into_owned()));
        let mime = file.metadata.mimetype();
        // Text is UTF-8 throughout web/; say so rather than let the browser guess.
        let content_type = if mime.starts_with("text/") || mime.ends_with("javascript") {
            format!("{mime}; charset=utf-8")
        } else {
            mime.to_string()
        };
        response.headers_mut().insert(
            CONTENT_TYPE,
            content_type.parse().expect("a valid media type"),
        );
        response
    };
    let out = response.headers_mut();
    out.insert(ETAG, etag.parse().expect("hex in quotes"));
    out.insert(CACHE_CONTROL, "no-cache".parse().unwrap());
    out.insert(X_CONTENT_TYPE_OPTIONS, "nosniff".parse().unwrap());
    out.insert(
        "content-security-policy",
        CONTENT_SECURITY_POLICY.parse().unwrap(),
    );
    response
}

#[cfg(test)]
mod tests;
