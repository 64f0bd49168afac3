//! Decision tests: upstream replica-calculator and horizontal-controller vectors, WPA vectors,
//! one test per precedence rule, and property tests.

mod fallback;
mod fixtures;
mod precedence;
mod prometheus;
mod properties;
mod upstream;
mod wpa;
