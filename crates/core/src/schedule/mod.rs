//! Cron schedule evaluation, deterministic so that replay and the tests can use it.
