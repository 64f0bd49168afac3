//! The values of the spec's quantities, for range checks, ratios and milli-unit amounts.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The value of a quantity in its units, for range checks and ratios.
pub(crate) fn quantity_value(q: &Quantity) -> Result<f64, String> {
    crate::quantity::Quantity::try_from(q)
        .map(|q| q.as_f64())
        .map_err(|e| e.to_string())
}

/// The milli-units of a quantity, rounded up as upstream's `MilliValue()`.
pub(crate) fn quantity_milli(q: &Quantity) -> Result<i64, String> {
    let q = crate::quantity::Quantity::try_from(q).map_err(|e| e.to_string())?;
    i64::try_from(q.milli()).map_err(|_| format!("quantity {q} is out of range"))
}
