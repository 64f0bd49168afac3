//! The hpa-plus service.
//!
//! * [`replay`]: `hpa-plus replay`, the offline what-if over a scenario file.
//! * [`plot`]: the SVG chart `replay --plot` writes.

pub mod plot;
pub mod replay;
