//! Fuzz target: any text where a controller reads stored state back (the decision memory, the
//! tuning and predictive histories, a joint VPA's total usage, a VPA checkpoint, a CronHPA's
//! job conditions). Every restore must either read back a state the controller could have
//! written, within the documented caps, or say why it ignored it; none may panic (build with
//! overflow checks, as cargo fuzz does by default with debug assertions).
#![no_main]

use libfuzzer_sys::fuzz_target;
use plimsoll_core::stored::exercise;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        exercise::text(text, exercise::now());
    }
});
