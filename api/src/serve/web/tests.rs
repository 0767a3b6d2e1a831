use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use axum::http::{HeaderMap, StatusCode, Uri};

use super::asset;

async fn get(path: &str, headers: HeaderMap) -> axum::response::Response {
    asset(path.parse::<Uri>().unwrap(), headers).await
}

#[tokio::test]
async fn files_have_their_content_type_and_an_etag_to_revalidate() {
    let index = get("/", HeaderMap::new()).await;
    assert_eq!(index.status(), StatusCode::OK);
    assert_eq!(index.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
    assert_eq!(index.headers()[CACHE_CONTROL], "no-cache");
    let script = get("/app.js", HeaderMap::new()).await;
    assert_eq!(
        script.headers()[CONTENT_TYPE],
        "text/javascript; charset=utf-8"
    );
    let style = get("/style.css", HeaderMap::new()).await;
    assert_eq!(style.headers()[CONTENT_TYPE], "text/css; charset=utf-8");

    let mut again = HeaderMap::new();
    again.insert(IF_NONE_MATCH, index.headers()[ETAG].clone());
    assert_eq!(get("/", again).await.status(), StatusCode::NOT_MODIFIED);
}

#[tokio::test]
async fn unknown_paths_and_the_readme_are_not_served() {
    assert_eq!(
        get("/nope.js", HeaderMap::new()).await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        get("/README.md", HeaderMap::new()).await.status(),
        StatusCode::NOT_FOUND
    );
}
