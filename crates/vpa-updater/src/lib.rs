//! The vpa-updater service.
