//! Owned by the vpa-updater/admission work; see vertical/mod.rs.
