//! The kubeconfig the sim writes: one cluster (the HTTPS server, trusting the generated CA),
//! one user with a bearer token (the admin's, or a ServiceAccount's), one context, current.

use crate::base64;

/// Renders a kubeconfig YAML for `server` (an `https://` URL) trusting `ca_pem`, with the
/// context's namespace `default`.
pub fn render(server: &str, ca_pem: &str, token: &str) -> String {
    render_in(server, ca_pem, token, "default")
}

/// Like [`render`], with the context's default namespace `namespace` (a ServiceAccount's own
/// namespace, as in-cluster configuration has it).
pub fn render_in(server: &str, ca_pem: &str, token: &str, namespace: &str) -> String {
    let ca = base64::encode(ca_pem.as_bytes());
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: plimsoll-sim
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: plimsoll-sim
  user:
    token: {token}
contexts:
- name: plimsoll-sim
  context:
    cluster: plimsoll-sim
    user: plimsoll-sim
    namespace: {namespace}
current-context: plimsoll-sim
preferences: {{}}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_parses_with_kube() {
        let yaml = render(
            "https://127.0.0.1:6443",
            "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n",
            "t",
        );
        let kc = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some("plimsoll-sim"));
        assert_eq!(
            kc.clusters[0].cluster.as_ref().unwrap().server.as_deref(),
            Some("https://127.0.0.1:6443")
        );
    }
}
