//! One-off lists of objects namespace users write, a page at a time. A list without a limit is
//! one response holding every object whole: a namespace's thousand HPAs fattened to 1.5 MiB
//! each are 1.5 GB read at once, and the process dies of it. [`list_summaries`] reads pages of
//! [`LIST_PAGE`] objects, as the watches do, and keeps of each only what the
//! caller maps it to.

use kube::api::{Api, ListParams};
use serde::de::DeserializeOwned;

use crate::watch::LIST_PAGE;

/// Every object `api` lists with `params` (its selectors; its limit is replaced), mapped by
/// `keep` one page at a time: only one page of whole objects is held at once.
pub async fn list_summaries<K, T>(
    api: &Api<K>,
    params: &ListParams,
    mut keep: impl FnMut(K) -> Option<T>,
) -> Result<Vec<T>, kube::Error>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let mut kept = Vec::new();
    let mut params = params.clone().limit(LIST_PAGE);
    loop {
        let page = api.list(&params).await?;
        let next = page.metadata.continue_.filter(|c| !c.is_empty());
        kept.extend(page.items.into_iter().filter_map(&mut keep));
        match next {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(kept),
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    use super::*;
    use crate::fake_api::FakeApi;

    const PATH: &str = "/api/v1/namespaces/shop/configmaps";

    fn page(names: std::ops::Range<u32>, next: Option<&str>) -> String {
        let items: Vec<_> = names
            .map(|i| {
                json!({"metadata": {"name": format!("c{i}"), "namespace": "shop"},
                "data": {"blob": "x".repeat(1000)}})
            })
            .collect();
        json!({"apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "7", "continue": next.unwrap_or_default()},
            "items": items})
        .to_string()
    }

    #[tokio::test]
    async fn every_page_is_read_and_only_the_summaries_kept() {
        let fake = FakeApi::new();
        fake.script(
            PATH,
            false,
            &[
                (200, page(0..50, Some("a"))),
                (200, page(50..100, Some("b"))),
                (200, page(100..120, None)),
            ],
        );
        let api: Api<ConfigMap> = Api::namespaced(fake.client(), "shop");
        let names = list_summaries(&api, &ListParams::default().labels("app=web"), |cm| {
            cm.metadata.name
        })
        .await
        .unwrap_or_default();
        assert_eq!(names.len(), 120);
        assert_eq!(names.last().map(String::as_str), Some("c119"));
        let uris: Vec<String> = fake.requests().into_iter().map(|r| r.uri).collect();
        assert_eq!(uris.len(), 3, "{uris:?}");
        assert!(
            uris.iter()
                .all(|u| u.contains("limit=50") && u.contains("labelSelector=app")),
            "{uris:?}"
        );
        assert!(uris[1].contains("continue=a") && uris[2].contains("continue=b"));
    }
}
