//! Sets `cfg(real_cluster)` when `PLIMSOLL_E2E_KUBECONFIG` names a cluster, so that tests
//! needing the sim's control API are marked ignored there instead of passing untested.

fn main() {
    println!("cargo:rerun-if-env-changed=PLIMSOLL_E2E_KUBECONFIG");
    println!("cargo::rustc-check-cfg=cfg(real_cluster)");
    if std::env::var_os("PLIMSOLL_E2E_KUBECONFIG").is_some_and(|v| !v.is_empty()) {
        println!("cargo:rustc-cfg=real_cluster");
    }
}
