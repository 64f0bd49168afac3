//! The cron-hpa service.
