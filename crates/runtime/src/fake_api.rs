//! A scripted fake of the Kubernetes API for this crate's tests: answers by method and path with
//! canned JSON, 404 otherwise, and records every request (method, path with query, body).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::Client;
use kube::client::Body;

/// One recorded request.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// Path and query, percent-encoded as sent.
    pub uri: String,
    pub body: String,
}

/// Canned answers keyed by (method, path): (status, body).
type Routes = HashMap<(String, String), (u16, String)>;

#[derive(Clone, Default)]
pub struct FakeApi {
    routes: Arc<Mutex<Routes>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl FakeApi {
    pub fn new() -> Self {
        Self::default()
    }

    /// Answers `method path` (path without query) with `status` and `body`.
    pub fn respond(&self, method: &str, path: &str, status: u16, body: &str) {
        self.routes.lock().unwrap().insert(
            (method.to_owned(), path.to_owned()),
            (status, body.to_owned()),
        );
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    pub fn client(&self) -> Client {
        let this = self.clone();
        let service = tower::service_fn(move |req: Request<Body>| {
            let this = this.clone();
            async move {
                let method = req.method().to_string();
                let path = req.uri().path().to_owned();
                let uri = req
                    .uri()
                    .path_and_query()
                    .map_or(path.clone(), ToString::to_string);
                let body = req.into_body().collect_bytes().await.unwrap();
                this.requests.lock().unwrap().push(Recorded {
                    method: method.clone(),
                    uri,
                    body: String::from_utf8_lossy(&body).into_owned(),
                });
                let route = this
                    .routes
                    .lock()
                    .unwrap()
                    .get(&(method, path.clone()))
                    .cloned();
                let (status, body) = route.unwrap_or_else(|| {
                    (
                        404,
                        format!(
                            r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server could not find the requested resource ({path})","reason":"NotFound","code":404}}"#
                        ),
                    )
                });
                let response = Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(Body::from(body.into_bytes()))
                    .unwrap();
                Ok::<_, Infallible>(response)
            }
        });
        Client::new(service, "default")
    }
}
