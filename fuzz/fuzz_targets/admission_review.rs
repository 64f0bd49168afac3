//! Fuzz target: any body the webhook can receive. The decoder must never panic, and a pod
//! request must always be answered `allowed` (the webhook never blocks a pod).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use plimsoll_vpa_admission::webhook::Webhook;

fn webhook() -> &'static Webhook {
    static WEBHOOK: OnceLock<Webhook> = OnceLock::new();
    WEBHOOK.get_or_init(plimsoll_vpa_admission::webhook::fixture_webhook)
}

fuzz_target!(|data: &[u8]| {
    let _ = plimsoll_vpa_admission::review::decode(data);
    if let Ok(response) = webhook().answer(data) {
        let request = plimsoll_vpa_admission::review::decode(data).expect("answered, so it decodes");
        assert_eq!(response.uid, request.uid);
        if request.kind.kind == "Pod" && request.kind.group.is_empty() {
            assert!(response.allowed, "a pod was denied");
        }
    }
});
