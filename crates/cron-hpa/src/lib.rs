//! The cron-hpa service.

pub mod replay;
