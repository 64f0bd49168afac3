//! The args in `deploy/vpa-recommender/deployment.yaml` parse with the binary's flags.

use plimsoll_vpa_recommender::cli::Args;

#[test]
fn deployment_args_parse() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/vpa-recommender/deployment.yaml"
    );
    let text = std::fs::read_to_string(path).expect("deployment.yaml");
    let doc: serde_json::Value = serde_saphyr::from_str(&text).expect("yaml");
    let container = &doc["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "vpa-recommender");
    let args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string").to_owned())
        .collect();
    let parsed = Args::from_flags(std::iter::once("vpa-recommender".to_owned()).chain(args))
        .expect("deployment args parse");
    let config = parsed.into_config();
    assert_eq!(config.common.metrics_address.port(), 8942);
    assert_eq!(config.recommender_name, "plimsoll");
    assert!(config.prometheus.is_none());
}
