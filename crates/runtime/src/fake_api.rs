//! A scripted fake of the Kubernetes API for this crate's tests: answers by method and path with
//! canned JSON, 404 otherwise, and records every request (method, path with query, body).
//! A route can also be scripted ([`FakeApi::script`]): successive answers for the lists or the
//! watches of a path, then a watch that stays open and sends nothing.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Bytes, Frame};
use kube::Client;
use kube::client::Body;

type Answer = BoxBody<Bytes, Infallible>;

fn full(body: String) -> Answer {
    Full::new(Bytes::from(body)).boxed()
}

/// A body that never ends and sends nothing.
fn open() -> Answer {
    StreamBody::new(futures::stream::pending::<Result<Frame<Bytes>, Infallible>>()).boxed()
}

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

/// Scripted answers keyed by (path, is a watch), in order.
type Scripts = HashMap<(String, bool), VecDeque<(u16, String)>>;

/// The discovery lists of the group-versions `routes` answer, as an API server serves them:
/// `/api` names `v1`, `/apis` every `/apis/<group>/<version>` answered with 200. A test that
/// scripts a group-version's resources needs nothing more for it to be served.
fn served(routes: &Routes, path: &str) -> Option<(u16, String)> {
    match path {
        "/api" => Some((
            200,
            r#"{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[]}"#.into(),
        )),
        "/apis" => {
            let mut groups: Vec<String> = routes
                .iter()
                .filter(|((method, _), (status, _))| method == "GET" && *status == 200)
                .filter_map(|((_, path), _)| {
                    let rest = path.strip_prefix("/apis/")?;
                    let (group, version) = rest.split_once('/')?;
                    (!version.contains('/')).then(|| {
                        format!(
                            r#"{{"name":"{group}","versions":[{{"groupVersion":"{rest}","version":"{version}"}}]}}"#
                        )
                    })
                })
                .collect();
            groups.sort();
            Some((
                200,
                format!(
                    r#"{{"kind":"APIGroupList","groups":[{}]}}"#,
                    groups.join(",")
                ),
            ))
        }
        _ => None,
    }
}

#[derive(Clone, Default)]
pub struct FakeApi {
    routes: Arc<Mutex<Routes>>,
    scripts: Arc<Mutex<Scripts>>,
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

    /// Answers the successive `GET path` lists (`watch`: the watches, `?watch=true`) with
    /// `answers` in order (a watch's body: its events, one JSON object a line); once they are
    /// used up, every further one gets a watch that stays open and sends nothing.
    pub fn script(&self, path: &str, watch: bool, answers: &[(u16, String)]) {
        self.scripts
            .lock()
            .unwrap()
            .insert((path.to_owned(), watch), answers.iter().cloned().collect());
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
                let watch = req
                    .uri()
                    .query()
                    .is_some_and(|q| q.split('&').any(|p| p == "watch=true"));
                let body = req.into_body().collect_bytes().await.unwrap();
                this.requests.lock().unwrap().push(Recorded {
                    method: method.clone(),
                    uri,
                    body: String::from_utf8_lossy(&body).into_owned(),
                });
                let scripted = this
                    .scripts
                    .lock()
                    .unwrap()
                    .get_mut(&(path.clone(), watch))
                    .map(VecDeque::pop_front);
                let route = {
                    let routes = this.routes.lock().unwrap();
                    routes
                        .get(&(method.clone(), path.clone()))
                        .cloned()
                        .or_else(|| (method == "GET").then(|| served(&routes, &path)).flatten())
                };
                let (status, body) = match scripted {
                    // The script is used up: a watch that stays open.
                    Some(None) => (200, open()),
                    Some(Some((status, body))) => (status, full(body)),
                    None => route.map_or_else(
                        || {
                            (
                                404,
                                full(format!(
                                    r#"{{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server could not find the requested resource ({path})","reason":"NotFound","code":404}}"#
                                )),
                            )
                        },
                        |(status, body)| (status, full(body)),
                    ),
                };
                let response = Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(body)
                    .unwrap();
                Ok::<_, Infallible>(response)
            }
        });
        Client::new(service, "default")
    }
}
